package dev.rdma.benchmarks;

import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.ReceiveWorkRequest;
import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.exchange.ExchangeListener;
import dev.rdma.verbs.exchange.ExchangeOptions;
import dev.rdma.verbs.exchange.OutOfBand;

/**
 * The Java side of the cross-device ping-pong benchmark: the twin of
 * {@code benchmarks/src/main/c/xdev_pingpong.c} (which is {@code ibv_rc_pingpong -e} with
 * a clock), through the binding - the exchange of {@code dev.rdma.verbs.exchange}, the
 * completion channel's events, {@code poll(buffer)} - with the same arguments, algorithm
 * and output lines ({@code impl=java}). Nothing is allocated per message.
 *
 * <p>
 * <b>JIT.</b> The guest's one emulated CPU runs both programs, rxe and the JIT, so a
 * compilation during the measured round trips is paid by them. The work of one completion
 * event is a small method ({@link Loop#event()}), compiled by C2 as an application's
 * per-event code would be, instead of a loop in {@code main} that only on-stack
 * replacement could compile (and recompile after every rarely taken branch: C2 then used
 * 0.3 ms of CPU per measured round trip on each side). The warm-up runs whole repetitions
 * through the measured code; then both sides wait for a quiet JIT
 * ({@link Jit#awaitQuiet()}), run as many round trips again, and wait again, each wait
 * inside an unmeasured round trip. The second phase is as long as the first: a method
 * called once per event reaches C2's threshold (5000 calls of its C1 code) only after
 * some thousands of events, and the first phase change deoptimizes code that then has to
 * be compiled again (with one repetition between the waits, the server's per-event code
 * got its C2 code inside the measured round trips). Each side prints the CPU per measured
 * round trip of its busiest threads ({@link ThreadCpu}).
 *
 * <p>
 * <b>CPU.</b> With {@code XDEV_CPU=n} in the environment the loop thread is pinned to CPU
 * n right before the loop (not the JVM's other threads), as the C twin pins itself.
 * {@code XDEV_CASE} replaces the case prefix {@code xdev}, {@code XDEV_PARAMS} adds
 * parameters to the result lines.
 *
 * <p>
 * <b>Wait.</b> The channel is {@link CompletionChannel.WaitMode#BLOCKING_READ}, so each
 * event costs one {@code read(2)} as in the C twin; {@code XDEV_WAIT=poll} measures the
 * default mode (read, poll, read). {@code XDEV_MODE=poll} is {@code ibv_rc_pingpong}
 * without {@code -e}, as in the C twin: no events, the CQ polled until it returns a
 * completion ({@link Loop#spin()}).
 *
 * <pre>XdevPingPong DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER_IPV4]</pre>
 */
public final class XdevPingPong {

	static final long RECV_WRID = 1;

	static final long SEND_WRID = 2;

	static final int RX_DEPTH = 500;

	private XdevPingPong() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length < 7) {
			System.err.println("usage: XdevPingPong DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER_IPV4]");
			System.exit(2);
		}
		String device = args[0];
		int gidIndex = Integer.parseInt(args[1]);
		int port = Integer.parseInt(args[2]);
		int iters = Integer.parseInt(args[3]);
		int warmup = Integer.parseInt(args[4]);
		int reps = Integer.parseInt(args[5]);
		int size = Integer.parseInt(args[6]);
		String serverIp = args.length > 7 ? args[7] : null;
		boolean client = serverIp != null;
		ExchangeOptions options = ExchangeOptions.defaults().withGidIndex(gidIndex);
		try (Context ctx = Context.open(device); WorkCompletionBuffer buffer = new WorkCompletionBuffer(2)) {
			CompletionChannel channel = ctx.createCompletionChannel(CompletionChannel.WaitMode
				.valueOf(System.getenv().getOrDefault("XDEV_WAIT", "BLOCKING_READ").toUpperCase(Locale.ROOT)));
			CompletionQueue cq = ctx.createCompletionQueue(RX_DEPTH + 1, channel, 0);
			ProtectionDomain pd = ctx.allocateProtectionDomain();
			MemoryRegion mr = pd.registerMemory(2L * size, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			mr.buffer().fill((byte) 0x7b);
			QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 8, RX_DEPTH, false));
			qp.moveToInit(1);
			ReceiveWorkRequest firstReceives = new ReceiveWorkRequest().wrId(RECV_WRID).buffer(mr, 0, size);
			for (int i = 0; i < RX_DEPTH; i++) {
				qp.postRecv(firstReceives);
			}
			boolean busy = "poll".equals(System.getenv("XDEV_MODE"));
			// armed before the exchange, as rc_pingpong: the peer may send as soon as it
			// is over
			if (!busy) {
				cq.requestNotify(false);
			}
			if (client) {
				OutOfBand.connect(qp, new InetSocketAddress(InetAddress.getByName(serverIp), port), options);
			}
			else {
				try (ExchangeListener listener = ExchangeListener.bind(new InetSocketAddress(port))) {
					OutOfBand.accept(listener, qp, options.withConnectTimeout(java.time.Duration.ofMinutes(5)));
				}
			}
			Loop loop = new Loop(client, busy, channel, cq, qp, mr, buffer, size, iters, warmup, reps);
			String pinned = CpuAffinity.pinCurrentThreadFromEnv("XDEV_CPU");
			loop.run();
			if (cq.ackEvents() != loop.events) {
				throw new IllegalStateException("acked events differ from the " + loop.events + " got");
			}
			ThreadCpu.printTop(
					"# xdev_pingpong Java " + (client ? "client" : "server")
							+ " cpu per measured round trip by thread (user+system):",
					loop.cpuBefore, ThreadCpu.snapshot(), (double) iters * reps);
			if (client) {
				System.out.printf(Locale.ROOT,
						"# xdev_pingpong Java client on %s -> %s: %d round trips of %d bytes, %s, %d completion events (%s channel), loop thread %s%n",
						device, serverIp, loop.total, size, busy ? "busy polling" : "events", loop.events,
						channel.waitMode(), pinned);
				int from = loop.settled / iters;
				double[] p50 = new double[reps];
				double[] p99 = new double[reps];
				for (int r = 0; r < reps; r++) {
					long[] v = Arrays.copyOfRange(loop.rtt, (from + r) * iters, (from + r + 1) * iters);
					Arrays.sort(v);
					p50[r] = v[iters / 2] / 1e3;
					p99[r] = v[(int) (iters * 0.99)] / 1e3;
				}
				String name = System.getenv().getOrDefault("XDEV_CASE", "xdev");
				String params = System.getenv().getOrDefault("XDEV_PARAMS", "");
				report(name + "_rate", params, "msgs/s", Arrays.copyOfRange(loop.rate, from, from + reps));
				report(name + "_p50", params, "us", p50);
				report(name + "_p99", params, "us", p99);
			}
		}
	}

	private static void report(String name, String params, String unit, double[] v) {
		Arrays.sort(v);
		// one write(2) for the whole line: a peer process printing to the same file
		// cannot split it (printf wrote it in pieces)
		System.out.print(
				String.format(Locale.ROOT, "case=%s%s impl=java unit=%s median=%.2f min=%.2f max=%.2f reps=%d%n", name,
						params.isEmpty() ? "" : " " + params, unit, v[v.length / 2], v[0], v[v.length - 1], v.length));
	}

	/**
	 * One side's ping-pong: {@link #event()} is the work of one completion event
	 * (rc_pingpong's loop body); the rest runs once per repetition or once.
	 */
	static final class Loop {

		private static final long EVENT_TIMEOUT_NANOS = 60_000_000_000L;

		final boolean client;

		/** {@code XDEV_MODE=poll}: {@link #spin()} instead of {@link #event()}. */
		final boolean busy;

		final CompletionChannel channel;

		final CompletionQueue cq;

		final QueuePair qp;

		final MemoryRegion mr;

		/** The one send and the one receive, filled once (as ibv_rc_pingpong's). */
		final SendWorkRequest send;

		final ReceiveWorkRequest receive;

		final WorkCompletionBuffer buffer;

		final int size;

		final int iters;

		/** Round trips before the first quiet wait (whole repetitions). */
		final int warmup;

		/**
		 * Round trips before the measured ones (after the second quiet wait): twice the
		 * warm-up, so that what the first phase change deoptimized is compiled again
		 * before the measurement.
		 */
		final int settled;

		final int total;

		final long[] rtt;

		final double[] rate;

		int scnt;

		int rcnt;

		int routs = RX_DEPTH;

		long pending = RECV_WRID;

		int events;

		long t0;

		long start;

		Map<String, String[]> cpuBefore = Map.of();

		/** The instruction-count mode's group label ({@link InsnMark}). */
		final MemorySegment insnGroup;

		Loop(boolean client, boolean busy, CompletionChannel channel, CompletionQueue cq, QueuePair qp, MemoryRegion mr,
				WorkCompletionBuffer buffer, int size, int iters, int warmup, int reps) {
			this.client = client;
			this.busy = busy;
			this.channel = channel;
			this.cq = cq;
			this.qp = qp;
			this.mr = mr;
			this.send = new SendWorkRequest().wrId(SEND_WRID).buffer(mr, size, size);
			this.receive = new ReceiveWorkRequest().wrId(RECV_WRID).buffer(mr, 0, size);
			this.buffer = buffer;
			this.size = size;
			this.iters = iters;
			int warmupReps = Math.max(1, (warmup + iters - 1) / iters);
			this.warmup = warmupReps * iters;
			this.settled = 2 * this.warmup;
			this.total = settled + iters * reps;
			this.rtt = new long[total + 1];
			this.rate = new double[total / iters];
			this.insnGroup = InsnMark.label("B case=" + System.getenv().getOrDefault("XDEV_CASE", "xdev")
					+ " impl=java rt=" + iters + " " + System.getenv().getOrDefault("XDEV_PARAMS", ""));
		}

		void run() throws InterruptedException {
			start = System.nanoTime();
			if (client) {
				t0 = System.nanoTime();
				qp.postSend(send);
				pending |= SEND_WRID;
			}
			if (busy) {
				while (rcnt < total || scnt < total) {
					spin();
				}
			}
			else {
				while (rcnt < total || scnt < total) {
					event();
				}
			}
		}

		/**
		 * Waits for one completion event, re-arms, and polls the CQ once, as
		 * {@code ibv_rc_pingpong -e} and the C twin do: the CQ is re-armed before the
		 * poll, so a completion that arrives after it raises the next event, and a side
		 * has at most two completions outstanding (its send and one receive), which the
		 * buffer of two holds. The events are acked once after the loop, as in the C twin
		 * and {@code ibv_rc_pingpong}.
		 */
		void event() throws InterruptedException {
			if (channel.getEvent(EVENT_TIMEOUT_NANOS, null) == null) {
				throw new IllegalStateException(
						"no completion event within 60 s after " + scnt + " sends and " + rcnt + " receives");
			}
			events++;
			cq.requestNotify(false);
			completions(cq.poll(buffer));
		}

		/**
		 * Polls the CQ until it returns a completion, as {@code ibv_rc_pingpong} without
		 * {@code -e} and the C twin with {@code XDEV_MODE=poll} do, with
		 * {@link Thread#onSpinWait()} between empty polls as the C twin pauses (under
		 * single-threaded TCG a spin without a pause holds the emulator until its next
		 * timer kick); every 2^20 empty polls the clock is read, so that a peer that is
		 * gone ends the loop after 60 s.
		 */
		void spin() throws InterruptedException {
			int n;
			int empty = 0;
			long deadline = 0;
			while ((n = cq.poll(buffer)) == 0) {
				Thread.onSpinWait();
				if (++empty == 1 << 20) {
					empty = 0;
					long now = System.nanoTime();
					if (deadline == 0) {
						deadline = now + EVENT_TIMEOUT_NANOS;
					}
					else if (now - deadline > 0) {
						throw new IllegalStateException(
								"no completion within 60 s after " + scnt + " sends and " + rcnt + " receives");
					}
				}
			}
			completions(n);
		}

		private void completions(int n) throws InterruptedException {
			for (int i = 0; i < n; i++) {
				WorkCompletion wc = buffer.get(i);
				if (!wc.isSuccess()) {
					throw new IllegalStateException("completion of wr_id " + wc.wrId() + ": " + wc.status());
				}
				completed(wc.wrId());
			}
		}

		private void completed(long wrId) throws InterruptedException {
			if (wrId == SEND_WRID) {
				scnt++;
			}
			else {
				rcnt++;
				if (!client && rcnt % iters == 0) {
					serverRepetitionDone();
				}
				if (--routs <= 1) {
					refill();
				}
			}
			pending &= ~wrId;
			if (pending == 0 && client) {
				long t = System.nanoTime();
				rtt[scnt - 1] = t - t0;
				if (scnt % iters == 0) {
					repetitionDone(t);
				}
			}
			if (scnt < total && pending == 0) {
				t0 = System.nanoTime();
				qp.postSend(send);
				pending = RECV_WRID | SEND_WRID;
			}
		}

		/**
		 * The server's end of a repetition: before the last pong of each warm-up phase
		 * the JIT quiet wait (the client's unmeasured round trip absorbs it).
		 */
		private void serverRepetitionDone() throws InterruptedException {
			if (rcnt == warmup || rcnt == settled) {
				quiet(rcnt == settled);
			}
		}

		private void refill() {
			for (; routs < RX_DEPTH; routs++) {
				qp.postRecv(receive);
			}
		}

		/**
		 * The client's end of a repetition (warm-up ones included: the same code): its
		 * rate (the percentiles are computed after the loop: sorting here made the JIT
		 * compile the sort inside the measured repetitions); after the warm-up phases,
		 * the quiet waits.
		 */
		private void repetitionDone(long t) throws InterruptedException {
			int r = scnt / iters - 1;
			rate[r] = 2.0 * iters / ((t - start) / 1e9);
			if (scnt == warmup || scnt == settled) {
				System.err.println("# xdev_pingpong Java client: JIT quiet wait after round trip " + scnt
						+ (scnt == settled ? " (measuring from here)" : ""));
				quiet(scnt == settled);
				if (scnt == settled) {
					InsnMark.mark(insnGroup);
				}
				InsnMark.mark(InsnMark.BOUNDARY);
				start = System.nanoTime();
			}
			else {
				// the warm-up's boundaries marked too (outside the group: ignored), so
				// that
				// the marker's downcall is warm when the measured repetitions end
				InsnMark.mark(InsnMark.BOUNDARY);
				if (scnt == total) {
					InsnMark.mark(InsnMark.END);
				}
				start = t;
			}
		}

		/**
		 * With single-threaded TCG a compilation on the other vCPU takes its time from
		 * the round trips: go on when the JIT is quiet; before the measured part, mark
		 * the threads' CPU.
		 */
		private void quiet(boolean measuringNext) throws InterruptedException {
			// the snapshot twice: what the first one makes the JIT compile is compiled
			// during the wait, not in the measured round trips
			cpuBefore = ThreadCpu.snapshot();
			Jit.awaitQuiet();
			if (measuringNext) {
				cpuBefore = ThreadCpu.snapshot();
			}
		}

	}

}
