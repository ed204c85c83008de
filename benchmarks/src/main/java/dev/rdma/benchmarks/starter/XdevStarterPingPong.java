package dev.rdma.benchmarks.starter;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import dev.rdma.benchmarks.InsnMark;
import dev.rdma.benchmarks.Repetitions;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.verbs.CompletionQueue;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import static dev.rdma.benchmarks.starter.StarterBench.CLIENT_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.CONNECTION;
import static dev.rdma.benchmarks.starter.StarterBench.SERVER_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.awaitEstablished;
import static dev.rdma.benchmarks.starter.StarterBench.env;
import static dev.rdma.benchmarks.starter.StarterBench.report;
import static dev.rdma.benchmarks.starter.StarterBench.start;

/**
 * The cross-device ping-pong of {@code benchmarks/src/main/c/xdev_pingpong.c} (issue 17)
 * through the starter: an echo-server application on device B and a client application on
 * device A, in this one JVM, each configured through properties only (a device, a
 * completion channel, one completion queue for sends and receives as in the C twin, and
 * {@code rdma.connections.xs} with {@code listen} or {@code connect} + {@code source}).
 * The server's {@link RdmaMessageListener} echoes every message from its receive buffer
 * ({@code m.connection().send(m.byteBuffer())}); the client sends SIZE bytes, one message
 * in flight, at least WARMUP round trips (then chunks of ITERS until the JIT has compiled
 * nothing for 10 chunks, and is quiet: {@link Repetitions}; the C twin has no JIT), then
 * REPS repetitions of ITERS in one run, and prints the C twin's lines
 * ({@code case=xstarter_rate|_p50|_p99 impl=java}, 2 messages per round trip,
 * per-repetition percentiles of the round trip) with {@code mode=.. driver=..}.
 *
 * <p>
 * DRIVER is who sends the next ping:
 * <ul>
 * <li>{@code thread}: an application thread (this program's main thread) sends through
 * the {@link RdmaConnection} bean and parks until the client's listener, on the client's
 * poller thread, has the echo and unparks it; the round trip is timed on the sending
 * thread, wake-up included;</li>
 * <li>{@code listener}: the client's listener sends the next ping itself, on the poller
 * thread, as the C twin's one thread does (the round trip is timed from the send to the
 * listener call of its echo).</li>
 * </ul>
 * MODE is the pollers' {@code polling.mode}: {@code event} (as the C twin) or
 * {@code busy}.
 *
 * <p>
 * Allocation: {@code com.sun.management.ThreadMXBean#getThreadAllocatedBytes} of the
 * sending thread and of the two poller threads ({@code rdma-poller-xsc},
 * {@code rdma-poller-xss}) over the measured repetitions, printed as
 * {@code case=alloc of=xstarter_<mode>_<driver>_<thread>} in bytes per round trip (each
 * side sends one message and receives one per round trip).
 *
 * <p>
 * Devices and addresses come from the environment of {@code scripts/softroce-vm
 * --two-devices}: {@code RDMA_DEVICE_A/_B}, {@code RDMA_IP_A/_B}.
 *
 * <pre>XdevStarterPingPong MODE DRIVER TCP_PORT ITERS WARMUP REPS SIZE</pre>
 */
public final class XdevStarterPingPong {

	/** As the C twin: 8 sends, 500 receives. */
	static final int SEND_DEPTH = 8;

	static final int RECEIVE_DEPTH = 500;

	private XdevStarterPingPong() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length < 7) {
			System.err.println("usage: XdevStarterPingPong event|busy thread|listener TCP_PORT ITERS WARMUP REPS SIZE");
			System.exit(2);
		}
		String mode = args[0];
		String driver = args[1];
		int port = Integer.parseInt(args[2]);
		int iters = Integer.parseInt(args[3]);
		int warmup = Integer.parseInt(args[4]);
		int reps = Integer.parseInt(args[5]);
		int size = Integer.parseInt(args[6]);
		if (!List.of("event", "busy").contains(mode) || !List.of("thread", "listener").contains(driver) || warmup < 1) {
			System.err.println("XdevStarterPingPong: MODE event|busy, DRIVER thread|listener, WARMUP >= 1");
			System.exit(2);
		}
		String devA = env("RDMA_DEVICE_A");
		String devB = env("RDMA_DEVICE_B");
		String ipA = env("RDMA_IP_A");
		String ipB = env("RDMA_IP_B");
		String name = "xstarter_" + mode + "_" + driver;
		long boot = System.nanoTime();
		try (ConfigurableApplicationContext server = start(EchoApp.class,
				properties(devB, SERVER_QUEUE, mode, size, "listen=" + ipB + ":" + port));
				ConfigurableApplicationContext client = start(ClientApp.class,
						clientProperties(devA, ipA, ipB, mode, size, port))) {
			RdmaConnection connection = awaitEstablished(client, ipA + " -> " + ipB + ":" + port);
			System.err.printf(Locale.ROOT,
					"XdevStarterPingPong: %s: both applications up and connected in %.1f s: "
							+ "%s (%s) -> %s (%s) port %d%n",
					name, (System.nanoTime() - boot) / 1e9, devA, ipA, devB, ipB, port);
			Pinger pinger = client.getBean(Pinger.class);
			Echo echo = server.getBean(Echo.class);
			pinger.insnCase = name;
			pinger.insnGroup = InsnMark.label("B case=" + name + " impl=java rt=" + iters);
			Result r = pinger.run(connection, "listener".equals(driver), iters, warmup, reps, size);
			if (echo.wrongLength != 0 || pinger.wrongLength != 0) {
				throw new IllegalStateException(
						"messages of a wrong length: server " + echo.wrongLength + ", client " + pinger.wrongLength);
			}
			CompletionQueue cq = client.getBean(CLIENT_QUEUE, CompletionQueue.class);
			CompletionQueue sq = server.getBean(SERVER_QUEUE, CompletionQueue.class);
			System.out.printf(Locale.ROOT,
					"# xstarter Java (%s polling, %s driver) client on %s -> %s: %d round trips of %d bytes, "
							+ "completion events client %d, server %d; echoed %d; sent %d received %d%n",
					mode, driver, devA, ipB, pinger.warmedUp + iters * reps, size, cq.eventsGot(), sq.eventsGot(),
					echo.echoed, connection.statistics().messagesSent(), connection.statistics().messagesReceived());
			String extra = " mode=" + mode + " driver=" + driver;
			report("xstarter_rate", extra, "msgs/s", r.rate);
			report("xstarter_p50", extra, "us", r.p50);
			report("xstarter_p99", extra, "us", r.p99);
			for (int i = 0; i < r.threads.size(); i++) {
				double[] b = r.bytes[i];
				double sum = Arrays.stream(b).sum() * iters;
				String perRep = Arrays.toString(Arrays.stream(b).mapToLong(x -> Math.round(x * iters)).toArray());
				report("alloc", " of=" + name + "_" + r.threads.get(i), "B_per_message", b);
				System.out.printf(Locale.ROOT,
						"# xstarter %s %s: %.0f bytes allocated in %d measured round trips (per repetition: %s)%n",
						name, r.threads.get(i), sum, iters * reps, perRep);
			}
		}
	}

	/** The properties of one side: device, channel, one queue for both directions. */
	static List<String> properties(String device, String queue, String mode, int size, String endpoint) {
		String c = "rdma.connections." + CONNECTION;
		List<String> p = StarterBench.side(device, queue, mode, SEND_DEPTH + RECEIVE_DEPTH + 4, SEND_DEPTH,
				RECEIVE_DEPTH, size);
		p.add(c + "." + endpoint);
		return p;
	}

	static List<String> clientProperties(String device, String ip, String serverIp, String mode, int size, int port) {
		List<String> p = properties(device, CLIENT_QUEUE, mode, size, "connect=" + serverIp + ":" + port);
		p.add("rdma.connections." + CONNECTION + ".source=" + ip);
		return p;
	}

	/**
	 * The poller thread of {@code queue} ({@code rdma-poller-<queue>}, a dedicated
	 * poller).
	 */
	static Thread poller(String queue) {
		String wanted = "rdma-poller-" + queue;
		for (Thread t : Thread.getAllStackTraces().keySet()) {
			if (t.getName().equals(wanted)) {
				return t;
			}
		}
		throw new IllegalStateException("no thread " + wanted);
	}

	/** bytes: per thread, per repetition, bytes allocated per round trip. */
	record Result(double[] rate, double[] p50, double[] p99, List<String> threads, double[][] bytes) {
	}

	// ---------------------------------------------------------------- the applications

	/**
	 * The server application: the starter's auto-configuration and the echo listener. Not
	 * a {@code @Component}: {@link StarterPingPong}'s component scan of this package must
	 * not find it.
	 */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class EchoApp {

		@Bean
		Echo echo() {
			return new Echo();
		}

	}

	/** Echoes every message back from its receive buffer, on the server's poller. */
	static class Echo {

		volatile long echoed;

		volatile long wrongLength;

		private int expected = -1;

		@RdmaMessageListener(connection = CONNECTION)
		void onMessage(RdmaMessage message) {
			if (expected < 0) {
				expected = message.length();
			}
			if (message.length() != expected) {
				wrongLength++;
			}
			message.connection().send(message.byteBuffer());
			echoed++;
		}

	}

	/** The client application: the auto-configuration and the {@link Pinger}. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class ClientApp {

		@Bean
		Pinger pinger() {
			return new Pinger();
		}

	}

	/**
	 * The client's side of the ping-pong: its listener takes each echo; nothing in the
	 * measured loop allocates (the round trips go into arrays made before).
	 */
	static final class Pinger {

		private long[] rtt = new long[0];

		private long[] repEnd = new long[0];

		/**
		 * Bytes allocated so far by the client poller, the server poller and the sending
		 * thread (thread driver) at the start of the measured round trips and at the end
		 * of each repetition.
		 */
		private long[][] alloc = new long[3][0];

		private com.sun.management.ThreadMXBean threads;

		private long clientPollerId;

		private long serverPollerId;

		private int total;

		/** Warm-up round trips done before the measured ones. */
		int warmedUp;

		private int warmup;

		private int iters;

		private int size;

		/**
		 * Round trips done in the current phase (a warm-up chunk, or the measured run).
		 */
		private int count;

		private int phaseLength;

		private boolean measuring;

		private long t0;

		private boolean listenerDriven;

		private MemorySegment ping = MemorySegment.NULL;

		private RdmaConnection connection;

		private volatile Thread waiter;

		/** Set by the listener, cleared by the sending thread. */
		private volatile boolean arrived;

		/** Listener-driven: counted down when the warm-up, then the run, is over. */
		private volatile CountDownLatch phase = new CountDownLatch(1);

		volatile long wrongLength;

		/**
		 * The instruction-count mode's group label ({@link InsnMark}): the measured round
		 * trips' repetitions are its windows.
		 */
		MemorySegment insnGroup = MemorySegment.NULL;

		/** The case's name, for the instruction-count mode's profile. */
		String insnCase = "";

		@RdmaMessageListener(connection = CONNECTION)
		void onEcho(RdmaMessage message) {
			long t = System.nanoTime();
			// a volatile read first: sees what the main thread wrote before it made
			// this phase's latch (measuring, phaseLength, count)
			CountDownLatch latch = phase;
			if (message.length() != size) {
				wrongLength++;
			}
			if (!listenerDriven) {
				arrived = true;
				LockSupport.unpark(waiter);
				return;
			}
			int n = ++count;
			// the same code in the warm-up (whose records the measured run overwrites):
			// a branch first taken in the measured run would deoptimize the poller's
			// compiled loop there (C2 recompiling it took 0.3 ms of CPU per measured
			// round trip)
			rtt[(n - 1) % rtt.length] = t - t0;
			if (n % iters == 0) {
				int k = (n / iters) % repEnd.length;
				repEnd[k] = t;
				snapshotAlloc(k, false);
				InsnMark.mark(InsnMark.BOUNDARY);
			}
			if (n == phaseLength) {
				latch.countDown(); // the main thread goes on
				return;
			}
			t0 = System.nanoTime();
			message.connection().send(ping);
		}

		Result run(RdmaConnection connection, boolean listenerDriven, int iters, int warmup, int reps, int size)
				throws InterruptedException {
			this.connection = connection;
			this.listenerDriven = listenerDriven;
			this.iters = iters;
			this.warmup = warmup;
			this.size = size;
			this.total = warmup + iters * reps;
			this.rtt = new long[iters * reps];
			this.repEnd = new long[reps + 1];
			this.alloc = new long[3][reps + 1];
			this.ping = Arena.global().allocate(size, 64).fill((byte) 0x7b);
			this.waiter = Thread.currentThread();
			var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
			Thread clientPoller = poller(CLIENT_QUEUE);
			Thread serverPoller = poller(SERVER_QUEUE);
			this.threads = threads;
			this.clientPollerId = clientPoller.threadId();
			this.serverPollerId = serverPoller.threadId();
			List<String> names = new ArrayList<>(List.of("client_poller", "server_poller"));
			// CPU time (user + system) of the same threads and of the whole process
			// over the measured repetitions: where the time of a round trip goes
			long[] cpuBefore = new long[4];
			long[] cpuAfter = new long[4];
			var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
			java.util.Map<String, String[]> allBefore = java.util.Map.of();
			java.util.Map<String, String[]> allAfter = java.util.Map.of();
			// The warm-up: WARMUP round trips, then chunks of ITERS until the JIT has
			// compiled nothing for 10 chunks in a row (Repetitions: at most 20 s more),
			// then until it is quiet. A method called once per message reaches C2 only
			// when its counters overflow again, which after a fixed warm-up of 3000 round
			// trips fell into the measured ones (C2 used 0.4 ms of CPU per round trip
			// there, on the single emulated CPU that also runs rxe).
			int warmed = 0;
			warmed += phase(warmup, threads);
			Repetitions rep = new Repetitions(name(), 0, 1);
			while (rep.next() && !rep.measured()) {
				warmed += phase(iters, threads);
			}
			// The quiet wait that ended the loop above left the pollers idle for longer
			// than their 500 ms channel wait. In event mode the first wait that times out
			// after C2 compiled the poll loop takes a branch the traffic never took: the
			// loop is deoptimized and compiled again, which in run 2 fell into the
			// measured round trips. Warm up once more, until the JIT is quiet again: the
			// loop compiled then has seen the timeout.
			Repetitions again = new Repetitions(name(), 0, 1);
			while (again.next() && !again.measured()) {
				warmed += phase(iters, threads);
			}
			System.err.printf(Locale.ROOT, "XdevStarterPingPong: %d warm-up round trips (at least %d)%n", warmed,
					warmup);
			this.warmedUp = warmed;
			measuring = true;
			if (!listenerDriven) {
				names.add("sender");
			}
			// markers for -XX:+PrintCompilation (what the JIT does during the measured
			// round trips)
			System.out.println("# xstarter measured round trips begin");
			cpu(threads, os, clientPoller, serverPoller, listenerDriven ? null : Thread.currentThread(), cpuBefore);
			allBefore = dev.rdma.benchmarks.ThreadCpu.snapshot();
			// instruction-count mode: the group's begin and end around the measured round
			// trips (the boundaries are marked in the warm-up too: the same code)
			InsnMark.mark(insnGroup);
			phase(iters * reps, threads);
			InsnMark.mark(InsnMark.END);
			InsnMark.saveProfileContext(insnCase);
			System.out.println("# xstarter measured round trips end");
			cpu(threads, os, clientPoller, serverPoller, listenerDriven ? null : Thread.currentThread(), cpuAfter);
			allAfter = dev.rdma.benchmarks.ThreadCpu.snapshot();
			double[] rate = new double[reps];
			double[] p50 = new double[reps];
			double[] p99 = new double[reps];
			for (int r = 0; r < reps; r++) {
				rate[r] = 2.0 * iters / ((repEnd[r + 1] - repEnd[r]) / 1e9);
				long[] v = Arrays.copyOfRange(rtt, r * iters, (r + 1) * iters);
				Arrays.sort(v);
				p50[r] = v[iters / 2] / 1e3;
				p99[r] = v[(int) (iters * 0.99)] / 1e3;
			}
			double[][] bytes = new double[names.size()][reps];
			for (int i = 0; i < bytes.length; i++) {
				for (int r = 0; r < reps; r++) {
					bytes[i][r] = (alloc[i][r + 1] - alloc[i][r]) / (double) iters;
				}
			}
			double rounds = (double) iters * reps;
			double wall = (repEnd[reps] - repEnd[0]) / rounds / 1e3;
			System.out.printf(Locale.ROOT,
					"# xstarter cpu per round trip (measured repetitions): wall %.1f us; client poller %.1f us, "
							+ "server poller %.1f us, sender thread %s, whole process %.1f us%n",
					wall, (cpuAfter[0] - cpuBefore[0]) / rounds / 1e3, (cpuAfter[1] - cpuBefore[1]) / rounds / 1e3,
					listenerDriven ? "- (the client poller sends)"
							: String.format(Locale.ROOT, "%.1f us", (cpuAfter[2] - cpuBefore[2]) / rounds / 1e3),
					(cpuAfter[3] - cpuBefore[3]) / rounds / 1e3);
			dev.rdma.benchmarks.ThreadCpu.printTop("# xstarter cpu per round trip by thread (user+system):", allBefore,
					allAfter, rounds);
			return new Result(rate, p50, p99, names, bytes);
		}

		/** CPU nanoseconds of the pollers, the sender (or 0) and the process. */
		private static void cpu(com.sun.management.ThreadMXBean threads, com.sun.management.OperatingSystemMXBean os,
				Thread clientPoller, Thread serverPoller, Thread sender, long[] into) {
			into[0] = threads.getThreadCpuTime(clientPoller.threadId());
			into[1] = threads.getThreadCpuTime(serverPoller.threadId());
			into[2] = sender == null ? 0 : threads.getThreadCpuTime(sender.threadId());
			into[3] = os.getProcessCpuTime();
		}

		private String name() {
			return "xstarter_" + (listenerDriven ? "listener" : "thread");
		}

		/**
		 * {@code n} round trips, one message in flight: sent by the client's listener
		 * (listener driver) or by this thread; when measuring, each round trip's time and
		 * the boundaries of the repetitions are recorded. Returns {@code n}.
		 */
		private int phase(int n, com.sun.management.ThreadMXBean threads) throws InterruptedException {
			count = 0;
			phaseLength = n;
			if (listenerDriven) {
				CountDownLatch latch = new CountDownLatch(1);
				phase = latch;
				snapshotAlloc(0, false);
				InsnMark.mark(InsnMark.BOUNDARY);
				repEnd[0] = System.nanoTime();
				t0 = System.nanoTime();
				connection.send(ping);
				await(latch, measuring ? "run" : "warm-up");
				return n;
			}
			snapshotAlloc(0, true);
			InsnMark.mark(InsnMark.BOUNDARY);
			repEnd[0] = System.nanoTime();
			long limit = TimeUnit.SECONDS.toNanos(60);
			for (int i = 0; i < n; i++) {
				arrived = false;
				long start = System.nanoTime();
				connection.send(ping);
				while (!arrived) {
					LockSupport.parkNanos(this, limit);
					if (!arrived && System.nanoTime() - start > limit) {
						throw new IllegalStateException("no echo within 60 s of round trip " + i);
					}
				}
				long t = System.nanoTime();
				// as in the listener: the same code in the warm-up
				rtt[i % rtt.length] = t - start;
				if ((i + 1) % iters == 0) {
					int k = ((i + 1) / iters) % repEnd.length;
					repEnd[k] = t;
					snapshotAlloc(k, true);
					InsnMark.mark(InsnMark.BOUNDARY);
				}
			}
			return n;
		}

		/**
		 * Repetition boundary {@code k}: the bytes allocated so far by the pollers and,
		 * when {@code sender}, by this (the sending) thread. Allocates nothing.
		 */
		private void snapshotAlloc(int k, boolean sender) {
			alloc[0][k] = threads.getThreadAllocatedBytes(clientPollerId);
			alloc[1][k] = threads.getThreadAllocatedBytes(serverPollerId);
			if (sender) {
				alloc[2][k] = threads.getCurrentThreadAllocatedBytes();
			}
		}

		private void await(CountDownLatch latch, String what) throws InterruptedException {
			if (!latch.await(15, TimeUnit.MINUTES)) {
				throw new IllegalStateException("the " + what + " did not end: " + count + " of " + phaseLength
						+ " round trips; connection " + connection.state());
			}
		}

	}

}
