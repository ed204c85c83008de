package dev.rdma.benchmarks.starter;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

import dev.rdma.benchmarks.Jit;
import dev.rdma.benchmarks.Progress;
import dev.rdma.benchmarks.ThreadAllocation;
import dev.rdma.benchmarks.ThreadCpu;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import static dev.rdma.benchmarks.starter.StarterBench.CLIENT_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.CONNECTION;
import static dev.rdma.benchmarks.starter.StarterBench.SERVER_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.env;
import static dev.rdma.benchmarks.starter.StarterBench.report;
import static dev.rdma.benchmarks.starter.StarterBench.start;

/**
 * Streaming through one connection of the starter (issue 33, cases {@code xstream},
 * {@code xstream_write}, {@code xstream_read} of {@code scripts/bench}), the Java side of
 * perftest's {@code ib_send_bw}, {@code ib_write_bw} and {@code ib_read_bw}: a server
 * application on device B and a client application on device A in this one JVM,
 * configured through properties only, as {@link XdevStarterPingPong}. The client's main
 * thread streams with a window of messages in flight:
 * <ul>
 * <li>{@code send}: {@link RdmaConnection#send(MemorySegment)} in a loop, the window
 * being the connection's {@code send-depth} send buffers (the call blocks while all are
 * in flight); the server's {@link RdmaMessageListener} counts what arrives, and the rate
 * is what the server received;</li>
 * <li>{@code write}: {@link RdmaConnection#write(long, MemorySegment)} into the server's
 * region ({@code remote-access-size}), slot after slot, the same window;</li>
 * <li>{@code read}: {@link RdmaConnection#read(long, MemorySegment)} blocks until its
 * READ completed, so READERS threads read at once (the window: perftest's {@code -o}
 * outstanding reads).</li>
 * </ul>
 * For each operation and size: WARMUP seconds of streaming, the JIT's quiet wait, one
 * second more (the pollers saw their idle timeout before the measured windows, see
 * {@link XdevStarterPingPong}), then REPS windows of WINDOW seconds back to back. Per
 * window: messages/s and MB/s (2^20 bytes, as perftest's MB/sec), the process's CPU time
 * per message ({@code OperatingSystemMXBean#getProcessCpuTime}: both applications, all
 * threads), and the bytes allocated per message by the data path's threads: the starter's
 * pollers and the application's streaming threads
 * ({@code com.sun.management.ThreadMXBean#getThreadAllocatedBytes}, read at the window's
 * boundaries; what all threads of the JVM allocated, the compilers' and the watchdog's
 * included, and the starter's control threads' bytes per second are printed beside it).
 * Lines {@code case=xstream_mbps|xstream_rate|xstream_cpu op=.. size=.. impl=java} and
 * {@code case=alloc of=xstream_<op>_<size>}; after each operation the threads' CPU per
 * message ({@code /proc/self/task}).
 *
 * <p>
 * Every message sent must arrive: after each send size the client waits until the server
 * received all it sent (up to 60 s) and fails otherwise; a write or read error fails the
 * run. Devices and addresses: {@code RDMA_DEVICE_A/_B}, {@code RDMA_IP_A/_B}
 * ({@code scripts/softroce-vm --two-devices}); extra properties for both applications in
 * {@code XSTREAM_PROPS} (space-separated {@code key=value}).
 *
 * <pre>XstreamBench OPS(send,write,read) MODE(event|busy) TCP_PORT WARMUP_S WINDOW_S REPS READERS SIZE...</pre>
 */
public final class XstreamBench {

	/** perftest's defaults: {@code -t 128} (tx depth), {@code -r 512} (rx depth). */
	static final int SEND_DEPTH = 128;

	static final int RECEIVE_DEPTH = 512;

	/** The largest size: every message goes out of a buffer of this size. */
	static final int MESSAGE_SIZE = 65536;

	/** The server's region for the writes and reads: 16 slots of the largest size. */
	static final int REGION = 1 << 20;

	/** Posts between two looks at the clock. */
	private static final int BATCH = 32;

	private XstreamBench() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length < 8) {
			System.err.println(
					"usage: XstreamBench send,write,read event|busy TCP_PORT WARMUP_S WINDOW_S REPS READERS SIZE...");
			System.exit(2);
		}
		List<String> ops = List.of(args[0].split(","));
		String mode = args[1];
		int port = Integer.parseInt(args[2]);
		double warmup = Double.parseDouble(args[3]);
		double window = Double.parseDouble(args[4]);
		int reps = Integer.parseInt(args[5]);
		int readers = Integer.parseInt(args[6]);
		int[] sizes = Arrays.stream(args, 7, args.length).mapToInt(Integer::parseInt).toArray();
		for (String op : ops) {
			if (!List.of("send", "write", "read").contains(op)) {
				throw new IllegalArgumentException("unknown operation " + op + " (send, write, read)");
			}
		}
		for (int s : sizes) {
			if (s < 1 || s > MESSAGE_SIZE) {
				throw new IllegalArgumentException("size " + s + " not in 1.." + MESSAGE_SIZE);
			}
		}
		String devA = env("RDMA_DEVICE_A");
		String devB = env("RDMA_DEVICE_B");
		String ipA = env("RDMA_IP_A");
		String ipB = env("RDMA_IP_B");
		long boot = System.nanoTime();
		Progress.startWatchdog("xstream", Long.getLong("xstream.stall-seconds", 1200));
		Progress.line("starting the server application on " + devB);
		try (ConfigurableApplicationContext server = start(SinkApp.class,
				properties(devB, SERVER_QUEUE, mode, "listen=" + ipB + ":" + port));
				ConfigurableApplicationContext client = start(SourceApp.class,
						properties(devA, CLIENT_QUEUE, mode, "connect=" + ipB + ":" + port, "source=" + ipA))) {
			Progress.line("both applications started");
			RdmaConnection connection = client.getBean(CONNECTION, RdmaConnection.class);
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
			while (connection.state() != ConnectionState.ESTABLISHED && System.nanoTime() < deadline) {
				Thread.sleep(10);
			}
			if (connection.state() != ConnectionState.ESTABLISHED) {
				throw new IllegalStateException("connection " + CONNECTION + " is " + connection.state()
						+ " after 120 s (" + ipA + " -> " + ipB + ":" + port + ")");
			}
			Progress.line("connected");
			System.err.printf(Locale.ROOT,
					"XstreamBench: both applications up and connected in %.1f s: "
							+ "%s (%s) -> %s (%s) port %d, %s polling%n",
					(System.nanoTime() - boot) / 1e9, devA, ipA, devB, ipB, port, mode);
			Stream stream = new Stream(connection, server.getBean(Sink.class), readers);
			boolean first = true;
			for (String op : ops) {
				Map<String, String[]> cpuBefore = ThreadCpu.snapshot();
				long messages = 0;
				try {
					for (int size : sizes) {
						// the first operation's first size warms the common code up
						// longer
						messages += stream.measure(op, size, first ? warmup * 4 : warmup, window, reps);
						first = false;
					}
				}
				catch (RuntimeException ex) {
					// the next operation still runs (if the connection survived)
					System.out.println("# xstream Java benchmark failed: " + op + ": " + ex);
					ex.printStackTrace();
					stream.stopReads();
					continue;
				}
				Map<String, String[]> cpuAfter = ThreadCpu.snapshot();
				ThreadCpu.printTop("# xstream " + op + " cpu per message by thread (user+system, all sizes, "
						+ "warm-up included):", cpuBefore, cpuAfter, messages);
			}
			stream.close();
			ConnectionStatistics st = connection.statistics();
			System.out.printf(Locale.ROOT,
					"# xstream Java client: sent %d messages (%d bytes), %d send errors, %d bytes written, "
							+ "%d bytes read, send queue full %d times; server received %d%n",
					st.messagesSent(), st.bytesSent(), st.sendErrors(), st.bytesWritten(), st.bytesRead(),
					st.sendQueueFull(), server.getBean(Sink.class).received);
			if (st.sendErrors() != 0) {
				throw new IllegalStateException(st.sendErrors() + " send errors");
			}
		}
	}

	/** One side: device, channel, one queue for both directions, the connection. */
	static List<String> properties(String device, String queue, String mode, String... endpoint) {
		String c = "rdma.connections." + CONNECTION;
		List<String> p = StarterBench.side(device, queue, mode, SEND_DEPTH + RECEIVE_DEPTH + 4, SEND_DEPTH,
				RECEIVE_DEPTH, MESSAGE_SIZE);
		p.addAll(List.of(c + ".remote-access-size=" + REGION, c + ".send-timeout=30s"));
		for (String e : endpoint) {
			p.add(c + "." + e);
		}
		String extra = System.getenv("XSTREAM_PROPS");
		if (extra != null && !extra.isBlank()) {
			p.addAll(List.of(extra.trim().split("\\s+")));
		}
		return p;
	}

	// ---------------------------------------------------------------- the applications

	/** The server application: the auto-configuration and the {@link Sink}. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class SinkApp {

		@Bean
		Sink sink() {
			return new Sink();
		}

	}

	/** The client application: the auto-configuration only. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class SourceApp {

	}

	/** Counts the messages and bytes the server receives, on the server's poller. */
	static class Sink {

		volatile long received;

		volatile long bytes;

		@RdmaMessageListener(connection = CONNECTION)
		void onMessage(RdmaMessage message) {
			// one writer (the server's poller): plain increments of volatile fields
			received = received + 1;
			bytes = bytes + message.length();
		}

	}

	/** The client's streaming loops; nothing in them allocates. */
	static final class Stream {

		private final RdmaConnection connection;

		private final Sink sink;

		private final MemorySegment source = Arena.global().allocate(MESSAGE_SIZE, 64).fill((byte) 0x5a);

		private final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory
			.getThreadMXBean();

		private final com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean) ManagementFactory
			.getOperatingSystemMXBean();

		/** Writes posted so far (the main thread's). */
		private long posted;

		/** Per reader, READs completed (padded: one counter per 8 longs). */
		private final AtomicLongArray done;

		private final Thread[] readerThreads;

		private final MemorySegment[] targets;

		/** 0: readers idle; 1: reading; 2: readers end. */
		private volatile int readState;

		private volatile int readSize = 1;

		private volatile Throwable readFailure;

		Stream(RdmaConnection connection, Sink sink, int readers) {
			this.connection = connection;
			this.sink = sink;
			this.done = new AtomicLongArray(readers * 8);
			this.readerThreads = new Thread[readers];
			this.targets = new MemorySegment[readers];
			for (int i = 0; i < readers; i++) {
				int k = i;
				this.targets[i] = Arena.global().allocate(MESSAGE_SIZE, 64);
				this.readerThreads[i] = Thread.ofPlatform()
					.name("xstream-reader-" + i)
					.daemon()
					.start(() -> readLoop(k));
			}
		}

		/**
		 * Warm-up, then REPS windows of one operation and size; prints their lines and
		 * returns the messages of the whole phase.
		 */
		long measure(String op, int size, double warmup, double window, int reps) throws InterruptedException {
			long before = count(op);
			MemorySegment data = source.asSlice(0, size);
			Progress.line(op + " " + size + " B: warm-up");
			run(op, data, size, (long) (warmup * 1e9));
			Progress.line(op + " " + size + " B: warm-up done (" + (count(op) - before) + " messages), JIT wait");
			Jit.awaitQuiet();
			run(op, data, size, TimeUnit.SECONDS.toNanos(1));
			Progress.line(op + " " + size + " B: measuring");
			double[] rate = new double[reps];
			double[] mbps = new double[reps];
			double[] cpu = new double[reps];
			double[] alloc = new double[reps];
			long[] allocRaw = new long[reps];
			long windowNanos = (long) (window * 1e9);
			if ("read".equals(op)) {
				readSize = size;
				readState = 1;
			}
			ThreadAllocation starter = ThreadAllocation.of((t) -> t == Thread.currentThread()
					|| t.getName().startsWith("rdma-poller-") || t.getName().startsWith("xstream-reader-"));
			ThreadAllocation control = ThreadAllocation
				.of((t) -> t.getName().startsWith("rdma-") && !t.getName().startsWith("rdma-poller-"));
			long[] perThread0 = starter.perThread();
			long[] controlThread0 = control.perThread();
			long t0 = System.nanoTime();
			long c0 = count(op);
			long cpu0 = os.getProcessCpuTime();
			long a0 = starter.allocated();
			long all0 = threads.getTotalThreadAllocatedBytes();
			long[] allRaw = new long[reps];
			for (int r = 0; r < reps; r++) {
				long end = t0 + windowNanos;
				if ("read".equals(op)) {
					while (System.nanoTime() < end) {
						Thread.sleep(5);
						failIfReadFailed();
					}
				}
				else {
					stream(op, data, size, end);
				}
				long t1 = System.nanoTime();
				long c1 = count(op);
				long cpu1 = os.getProcessCpuTime();
				long a1 = starter.allocated();
				long all1 = threads.getTotalThreadAllocatedBytes();
				long n = Math.max(1, c1 - c0);
				rate[r] = n / ((t1 - t0) / 1e9);
				mbps[r] = rate[r] * size / 1048576.0;
				cpu[r] = (cpu1 - cpu0) / 1e3 / n;
				allocRaw[r] = a1 - a0;
				allRaw[r] = all1 - all0;
				alloc[r] = (a1 - a0) / (double) n;
				t0 = t1;
				c0 = c1;
				cpu0 = cpu1;
				a0 = a1;
				all0 = all1;
			}
			long[] perThread1 = starter.perThread();
			long[] controlThread1 = control.perThread();
			double seconds = window * reps;
			if ("read".equals(op)) {
				readState = 0;
			}
			Progress.line(op + " " + size + " B: measured; settling");
			long total = settle(op) - before;
			String extra = " op=" + op + " size=" + size;
			report("xstream_mbps", extra, "MB/s", mbps);
			report("xstream_rate", extra, "msgs/s", rate);
			report("xstream_cpu", extra, "us_per_message", cpu);
			report("alloc", " of=xstream_" + op + "_" + size, "B_per_message", alloc);
			System.out.printf(Locale.ROOT,
					"# xstream %s %d B: %d messages in the phase; bytes allocated per window by the data path's "
							+ "threads: %s; by all threads of the JVM: %s; per data-path thread over the windows: "
							+ "%s; the starter's control threads (not per message: their idle loops) per second: "
							+ "%s%n",
					op, size, total, Arrays.toString(allocRaw), Arrays.toString(allRaw),
					starter.describe(perThread0, perThread1, 1),
					control.describe(controlThread0, controlThread1, seconds));
			return total;
		}

		/**
		 * Streams until the reads are stopped and the sends delivered; returns the count
		 * after that.
		 */
		private long settle(String op) throws InterruptedException {
			if ("read".equals(op)) {
				// the readers finish their READ in flight
				Thread.sleep(200);
				failIfReadFailed();
				return count(op);
			}
			if ("send".equals(op)) {
				long sent = posted;
				long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
				while (sink.received < sent && System.nanoTime() < deadline) {
					Thread.sleep(5);
				}
				if (sink.received != sent) {
					throw new IllegalStateException(
							"sent " + sent + " messages, the server received " + sink.received + " within 60 s");
				}
			}
			return count(op);
		}

		/** The operation's messages so far: received by the server, posted, or read. */
		private long count(String op) {
			return switch (op) {
				case "send" -> sink.received;
				case "write" -> posted;
				default -> {
					long n = 0;
					for (int i = 0; i < done.length(); i += 8) {
						n += done.get(i);
					}
					yield n;
				}
			};
		}

		/** Streams for {@code nanos}. */
		private void run(String op, MemorySegment data, int size, long nanos) throws InterruptedException {
			long end = System.nanoTime() + nanos;
			if ("read".equals(op)) {
				readSize = size;
				readState = 1;
				while (System.nanoTime() < end) {
					Thread.sleep(5);
					failIfReadFailed();
				}
				readState = 0;
				Thread.sleep(100);
				return;
			}
			stream(op, data, size, end);
		}

		/** Sends or writes {@code data} until {@code end} (System.nanoTime). */
		private void stream(String op, MemorySegment data, int size, long end) {
			boolean send = "send".equals(op);
			int slots = REGION / size;
			long n = posted;
			do {
				for (int i = 0; i < BATCH; i++) {
					if (send) {
						connection.send(data);
					}
					else {
						connection.write((n % slots) * size, data);
					}
					n++;
				}
				posted = n;
			}
			while (System.nanoTime() < end);
		}

		private void readLoop(int k) {
			int slot = k;
			int size = 0;
			MemorySegment target = targets[k];
			try {
				while (readState != 2) {
					if (readState != 1) {
						// 1 ms here cost ~5 ms of emulated CPU per streamed message (run
						// 3)
						Thread.sleep(50);
						continue;
					}
					if (size != readSize) {
						// a new size: a new view (not per message)
						size = readSize;
						target = targets[k].asSlice(0, size);
					}
					int slots = REGION / size;
					connection.read((long) (slot % slots) * size, target);
					slot++;
					done.lazySet(k * 8, done.get(k * 8) + 1);
				}
			}
			catch (Throwable ex) {
				readFailure = ex;
			}
		}

		private void failIfReadFailed() {
			Throwable f = readFailure;
			if (f != null) {
				throw new IllegalStateException("a reader failed: " + f, f);
			}
		}

		void stopReads() {
			readState = 0;
		}

		void close() {
			readState = 2;
		}

	}

}
