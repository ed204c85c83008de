package dev.rdma.benchmarks.starter;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.jspecify.annotations.Nullable;

import dev.rdma.benchmarks.CqBench;
import dev.rdma.benchmarks.Jit;
import dev.rdma.benchmarks.LatencyHistogram;
import dev.rdma.spring.listener.CompletionEventRouter;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollerSettings;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WorkCompletion;

/**
 * Poller groups against dedicated pollers (issue 16), Java side; the C twin is
 * {@code benchmarks/src/main/c/cq_group_bench.c}. For each N: N completion queues, each
 * with its own completion channel and its own loopback QP (send and receive completions
 * on that CQ), each QP keeping one message in flight: the listener of a CQ, on its
 * receive completion, records the message's latency (post of the send to the listener
 * call of its receive), re-posts the receive and posts the next send. The listeners run
 * on the starter's own pollers, built as the starter builds them
 * ({@link CompletionQueueListenerContainer}), in event mode: one dedicated thread per CQ
 * ({@code dedicated}), or a {@link PollerGroup} of 1 or 2 threads ({@code group}).
 * Traffic runs from set-up to tear-down; after a warm-up the aggregate rate and the
 * latency percentiles are measured over REPS windows of REP_MS each. Prints
 * {@code case=group_rate n=N threads=T impl=java ...}, {@code group_p50},
 * {@code group_p99} (dedicated: {@code dedicated_*}, {@code threads=dedicated}), the
 * pollers' allocation per message ({@code case=alloc}), and with IDLE_S > 0, after the
 * last N, the process CPU time used while the group idles (armed, waiting) for IDLE_S
 * seconds: {@code case=group_idle_cpu}. A size that fails (threads, memory, timeouts)
 * prints {@code case=... error=...} and the next one runs. The environment variable
 * {@code BENCH_GROUP_TAG} (e.g. {@code pair=1}) is appended to the parameters of every
 * line. As in the C twin, the latencies go to one histogram per poller thread and the
 * counters are written with plain (opaque/release) stores.
 *
 * <pre>java ... GroupBench dedicated|1|2 WARMUP_MS REP_MS REPS IDLE_S N...</pre>
 */
public final class GroupBench {

	static final int DEPTH = 4;

	static final int SLOT = 64;

	static final int MSG_LEN = 16;

	static final long RECV_ID_BASE = 1_000_000;

	static final int RECV = WcOpcode.RECV.code();

	private GroupBench() {
	}

	public static void main(String[] args) throws Exception {
		String mode = args[0];
		int warmupMs = Integer.parseInt(args[1]);
		int repMs = Integer.parseInt(args[2]);
		int reps = Integer.parseInt(args[3]);
		int idleS = Integer.parseInt(args[4]);
		boolean dedicated = "dedicated".equals(mode);
		String name = dedicated ? "dedicated" : "group";
		String threadsParam = dedicated ? "dedicated" : mode;
		String device = System.getenv("RDMA_TEST_DEVICE");
		try (Context ctx = Context.open(device == null || device.isBlank() ? null : device)) {
			for (int a = 5; a < args.length; a++) {
				int n = Integer.parseInt(args[a]);
				// e.g. pair=1 (scripts/bench)
				String tag = System.getenv("BENCH_GROUP_TAG");
				String extra = " n=" + n + " threads=" + threadsParam
						+ (tag == null || tag.isBlank() ? "" : " " + tag.strip());
				long t0 = System.nanoTime();
				boolean last = a == args.length - 1;
				System.err.printf(Locale.ROOT, "GroupBench: before%s: %d fds, %s%n", extra, fds(), vm());
				try (Run run = new Run(ctx, n, dedicated ? 0 : Integer.parseInt(mode))) {
					run.measure(name, extra, warmupMs, repMs, reps);
					if (last && idleS > 0 && !dedicated) {
						run.idle(name, extra, idleS);
					}
				}
				catch (Throwable ex) {
					String why = String.valueOf(ex).replaceAll("\\s+", "_");
					System.err.println("GroupBench: " + name + extra + " did not finish");
					ex.printStackTrace();
					for (String c : new String[] { "_rate", "_p50", "_p99" }) {
						System.out.printf(Locale.ROOT,
								"case=%s%s%s impl=java unit=- median=nan min=nan max=nan reps=0 error=%s%n", name, c,
								extra, why);
					}
					System.out.flush();
				}
				System.err.printf(Locale.ROOT, "GroupBench: %s%s took %.1f s%n", name, extra,
						(System.nanoTime() - t0) / 1e9);
			}
		}
	}

	/** N queues with their QPs and pollers, traffic running. */
	static final class Run implements AutoCloseable {

		private final int n;

		private final List<AutoCloseable> resources = new ArrayList<>();

		private final List<CompletionQueueListenerContainer> containers = new ArrayList<>();

		private final Flow[] flows;

		/**
		 * One latency histogram per poller thread, as the C twin keeps one per group
		 * thread: a window's snapshot sums a few histograms, not one per queue (with 512
		 * per-queue histograms the main thread's sums took 2 us of CPU per message from
		 * the one emulated CPU the pollers run on).
		 */
		private final Map<Thread, LatencyHistogram> histograms = new ConcurrentHashMap<>();

		private final CompletionEventRouter router = new CompletionEventRouter();

		private final PollerGroup group;

		Run(Context ctx, int n, int groupThreads) {
			this.n = n;
			this.flows = new Flow[n];
			if (groupThreads > 0) {
				PollerGroupSettings gs = PollerGroupSettings.DEFAULTS.withThreads(groupThreads)
					.withMode(PollingMode.EVENT);
				this.group = new PollerGroup("bench", gs, router);
			}
			else {
				this.group = null;
			}
			try {
				for (int i = 0; i < n; i++) {
					CompletionChannel ch = ctx.createCompletionChannel();
					resources.add(ch);
					CompletionQueue cq = ctx.createCompletionQueue(4 * DEPTH, ch, 0);
					resources.add(cq);
					LoopbackQueuePair qp = new LoopbackQueuePair(ctx, cq, cq, DEPTH, SLOT);
					resources.add(qp);
					flows[i] = new Flow(qp, histograms);
					PollerSettings settings = PollerSettings.DEFAULTS.withMode(PollingMode.EVENT);
					CompletionQueueListenerContainer c = new CompletionQueueListenerContainer("q" + i, cq, settings,
							router);
					Flow flow = flows[i];
					c.setupListener("flow" + i, wc -> flow.onCompletion((WorkCompletion) wc), false);
					c.setPollerGroup(group);
					containers.add(c);
				}
				for (CompletionQueueListenerContainer c : containers) {
					c.start();
				}
				for (Flow f : flows) {
					f.start();
				}
			}
			catch (RuntimeException | Error ex) {
				close();
				throw ex;
			}
		}

		void measure(String name, String extra, int warmupMs, int repMs, int reps) throws InterruptedException {
			var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
			Thread.sleep(warmupMs);
			// then until the JIT has compiled nothing for a second (at most 30 s more):
			// with two vCPUs on one emulating host thread a compiler thread takes the
			// pollers' time, so a window during compilation measures the JIT
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
			long compiled = Jit.compilationMillis();
			while (System.nanoTime() < deadline) {
				Thread.sleep(1000);
				long now = Jit.compilationMillis();
				if (now == compiled) {
					break;
				}
				compiled = now;
			}
			Jit.awaitQuiet();
			double[] rate = new double[reps];
			double[] p50 = new double[reps];
			double[] p99 = new double[reps];
			double[] alloc = new double[reps];
			LatencyHistogram before = new LatencyHistogram();
			LatencyHistogram after = new LatencyHistogram();
			System.err.println("GroupBench: measuring" + extra + " from JVM uptime "
					+ ManagementFactory.getRuntimeMXBean().getUptime() + " ms");
			java.util.Map<String, String[]> cpuBefore = dev.rdma.benchmarks.ThreadCpu.snapshot();
			long measuredFrom = messages();
			for (int r = 0; r < reps; r++) {
				List<Thread> pollers = pollerThreads();
				long a0 = allocated(threads, pollers);
				long m0 = messages();
				snapshot(before);
				long t0 = System.nanoTime();
				Thread.sleep(repMs);
				long t1 = System.nanoTime();
				long m1 = messages();
				snapshot(after);
				long a1 = allocated(threads, pollers);
				if (m1 == m0) {
					throw new IllegalStateException("no message completed in " + repMs + " ms");
				}
				rate[r] = (m1 - m0) * 1e9 / (t1 - t0);
				after.subtract(before);
				p50[r] = after.percentile(0.50) / 1e3;
				p99[r] = after.percentile(0.99) / 1e3;
				alloc[r] = (double) (a1 - a0) / (m1 - m0);
			}
			// where the CPU of the measured windows went (the JIT's threads included)
			dev.rdma.benchmarks.ThreadCpu.printTop("# " + name + extra + " cpu per message by thread (user+system):",
					cpuBefore, dev.rdma.benchmarks.ThreadCpu.snapshot(), messages() - measuredFrom);
			CqBench.report(name + "_rate", extra, "msgs_per_s", rate);
			CqBench.report(name + "_p50", extra, "us", p50);
			CqBench.report(name + "_p99", extra, "us", p99);
			CqBench.report("alloc", " of=" + name + "_pollers" + extra.replace(' ', '_'), "B_per_message", alloc);
			System.err.printf(Locale.ROOT, "GroupBench: %s%s: %d poller thread(s), %d live threads%n", name, extra,
					pollerThreads().size(), ManagementFactory.getThreadMXBean().getThreadCount());
		}

		/**
		 * Stops the traffic, lets the pollers arm and wait, and measures the process CPU
		 * time over {@code seconds}.
		 */
		void idle(String name, String extra, int seconds) throws InterruptedException {
			stopTraffic();
			Thread.sleep(1000);
			var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
			var threads = ManagementFactory.getThreadMXBean();
			List<Thread> pollers = pollerThreads();
			long p0 = pollerCpu(threads, pollers);
			long c0 = os.getProcessCpuTime();
			long t0 = System.nanoTime();
			Thread.sleep(seconds * 1000L);
			long c1 = os.getProcessCpuTime();
			long t1 = System.nanoTime();
			long p1 = pollerCpu(threads, pollers);
			double wall = t1 - t0;
			CqBench.report(name + "_idle_cpu", extra, "pct_of_core", new double[] { 100.0 * (c1 - c0) / wall });
			CqBench.report(name + "_idle_cpu_pollers", extra, "pct_of_core", new double[] { 100.0 * (p1 - p0) / wall });
		}

		private long messages() {
			long m = 0;
			for (Flow f : flows) {
				m += f.messages();
			}
			return m;
		}

		private void snapshot(LatencyHistogram into) {
			into.clear();
			for (LatencyHistogram h : histograms.values()) {
				into.add(h);
			}
		}

		private List<Thread> pollerThreads() {
			List<Thread> t = new ArrayList<>();
			if (group != null) {
				t.addAll(group.threads());
			}
			else {
				for (CompletionQueueListenerContainer c : containers) {
					Thread p = c.thread();
					if (p != null) {
						t.add(p);
					}
				}
			}
			return t;
		}

		private static long allocated(com.sun.management.ThreadMXBean threads, List<Thread> pollers) {
			long sum = 0;
			for (Thread t : pollers) {
				sum += Math.max(0, threads.getThreadAllocatedBytes(t.threadId()));
			}
			return sum;
		}

		private static long pollerCpu(java.lang.management.ThreadMXBean threads, List<Thread> pollers) {
			long sum = 0;
			for (Thread t : pollers) {
				sum += Math.max(0, threads.getThreadCpuTime(t.threadId()));
			}
			return sum;
		}

		private void stopTraffic() throws InterruptedException {
			for (Flow f : flows) {
				if (f != null) {
					f.stopping = true;
				}
			}
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
			for (Flow f : flows) {
				while (f != null && f.inFlight() && System.nanoTime() < deadline) {
					Thread.sleep(1);
				}
			}
		}

		@Override
		public void close() {
			try {
				stopTraffic();
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
			for (CompletionQueueListenerContainer c : containers) {
				c.signalStop();
			}
			long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
			for (CompletionQueueListenerContainer c : containers) {
				if (!c.awaitStop(deadline)) {
					System.err.println("GroupBench: " + c + " did not stop in time");
				}
			}
			for (int i = resources.size() - 1; i >= 0; i--) {
				try {
					resources.get(i).close();
				}
				catch (Exception ex) {
					System.err.println("GroupBench: closing " + resources.get(i) + ": " + ex);
				}
			}
			System.err.printf(Locale.ROOT,
					"GroupBench: closed %d queues; left open: %s native objects %s, %d fds, %s%n", n,
					NativeObjects.open(), NativeObjects.openByType(), fds(), vm());
		}

	}

	/** Open file descriptors of this process (what a leak would grow). */
	static long fds() {
		String[] fds = new java.io.File("/proc/self/fd").list();
		return fds == null ? -1 : fds.length;
	}

	/** VmRSS and the number of mappings of this process. */
	static String vm() {
		try {
			String rss = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))
				.stream()
				.filter(l -> l.startsWith("VmRSS"))
				.findFirst()
				.orElse("VmRSS: ?")
				.replaceAll("\\s+", " ");
			long maps = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps")).size();
			return rss + ", " + maps + " mappings";
		}
		catch (java.io.IOException ex) {
			return "?";
		}
	}

	/**
	 * One QP's traffic: one message in flight; written by its poller thread only, read
	 * (racily, between windows) by the main thread.
	 */
	static final class Flow {

		final LoopbackQueuePair qp;

		// The counters are written by the poller thread only and read by the main thread
		// between windows: opaque (messages) and release/acquire (received, written last)
		// accesses, plain moves on x86 as the C twin's relaxed atomics (a
		// volatile store would add a full fence per message that the C twin does not
		// pay).
		private static final VarHandle MESSAGES;

		private static final VarHandle RECEIVED;

		static {
			try {
				MethodHandles.Lookup lookup = MethodHandles.lookup();
				MESSAGES = lookup.findVarHandle(Flow.class, "messages", long.class);
				RECEIVED = lookup.findVarHandle(Flow.class, "received", long.class);
			}
			catch (ReflectiveOperationException ex) {
				throw new ExceptionInInitializerError(ex);
			}
		}

		private final Map<Thread, LatencyHistogram> histograms;

		/** The histogram of the poller thread that owns this flow's CQ (for life). */
		private @Nullable LatencyHistogram latency;

		private long messages;

		volatile boolean stopping;

		private long sentAt;

		private long sent;

		private long received;

		Flow(LoopbackQueuePair qp, Map<Thread, LatencyHistogram> histograms) {
			this.qp = qp;
			this.histograms = histograms;
			for (int i = 0; i < DEPTH; i++) {
				qp.postRecv(RECV_ID_BASE + i, i);
			}
		}

		void start() {
			sentAt = System.nanoTime();
			sent = 1;
			qp.postSend(0, 0, MSG_LEN, null);
		}

		/**
		 * Whether a message is still on its way (read received first: it is written
		 * last).
		 */
		boolean inFlight() {
			long r = (long) RECEIVED.getAcquire(this);
			return r < sent;
		}

		/** Messages completed so far (read by the main thread). */
		long messages() {
			return (long) MESSAGES.getOpaque(this);
		}

		/** On the poller thread. */
		void onCompletion(WorkCompletion wc) {
			if (!wc.isSuccess()) {
				throw new IllegalStateException("completion " + wc.status());
			}
			if (wc.opcodeCode() != RECV) {
				return; // the send's completion
			}
			long now = System.nanoTime();
			LatencyHistogram h = latency;
			if (h == null) {
				h = histograms.computeIfAbsent(Thread.currentThread(), t -> new LatencyHistogram());
				latency = h;
			}
			h.record(now - sentAt);
			long id = wc.wrId();
			qp.postRecv(id, (int) (id - RECV_ID_BASE));
			MESSAGES.setOpaque(this, messages + 1);
			if (!stopping) {
				sentAt = now;
				qp.postSend(sent, (int) (sent % DEPTH), MSG_LEN, null);
				sent++;
			}
			RECEIVED.setRelease(this, received + 1);
		}

	}

}
