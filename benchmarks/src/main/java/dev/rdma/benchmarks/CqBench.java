package dev.rdma.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

import dev.rdma.verbs.seam.BenchAccess;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The Java twin of {@code src/main/c/cq_bench.c}: the same cases, parameters, warm-up and
 * repetitions, through the binding. Prints one machine-readable line per case
 * ({@code case=... impl=java unit=... median=... min=... max=...}) plus the allocation of
 * the polling thread per completion ({@code case=alloc}). See docs/benchmarks.md.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp ... dev.rdma.benchmarks.CqBench [K R W EMPTY_ITERS E2E_MSGS]</pre>
 */
public final class CqBench {

	static final int SLOT = 64;
	static final int MSG_LEN = 16;
	static final int E2E_DEPTH = 16;
	static final long RECV_ID_BASE = 1_000_000;
	static final int RECV_OPCODE = WcOpcode.RECV.code();

	static int k = 4096;
	static int reps = 7;
	static int warmup = 3;
	static int emptyIters = 200_000;
	static int e2eMsgs = 2000;

	static final com.sun.management.ThreadMXBean THREADS = (com.sun.management.ThreadMXBean) ManagementFactory
		.getThreadMXBean();
	static long sink;

	/**
	 * bench_nop of libcqbench_nop.so, linked as the binding links poll_cq (critical,
	 * pointer arguments as longs).
	 */
	static final MethodHandle NOP = Linker.nativeLinker()
		.downcallHandle(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG), Linker.Option.critical(false));

	private CqBench() {
	}

	public static void main(String[] args) throws Throwable {
		if (args.length > 0)
			k = Integer.parseInt(args[0]);
		if (args.length > 1)
			reps = Integer.parseInt(args[1]);
		if (args.length > 2)
			warmup = Integer.parseInt(args[2]);
		if (args.length > 3)
			emptyIters = Integer.parseInt(args[3]);
		if (args.length > 4)
			e2eMsgs = Integer.parseInt(args[4]);
		String only = System.getenv("CQ_BENCH_CASES");
		THREADS.setThreadAllocatedMemoryEnabled(true);
		allocated(); // first call initialises what it needs
		System.out.printf(Locale.ROOT, "# impl=java K=%d reps=%d warmup=%d empty_iters=%d e2e_msgs=%d jvm=%s %s%n", k,
				reps, warmup, emptyIters, e2eMsgs, Runtime.version(),
				ManagementFactory.getRuntimeMXBean().getInputArguments());
		boolean device = only == null || only.contains("batch") || only.contains("ext") || only.contains("empty")
				|| only.contains("e2e");
		if (!device) { // the device-less cases only (call, ring): e.g. the host-CPU run
						// of scripts/bench
			if (only.contains("call")) {
				benchCall();
			}
			if (only.contains("ring")) {
				benchRing();
			}
			return;
		}
		try (Context ctx = DeviceTestSupport.openContext()) {
			System.err.println("CqBench: device " + ctx.deviceName());
			if (only == null || only.contains("batch")) {
				for (int batch : new int[] { 1, 16, 32 }) {
					benchLegacy(ctx, batch);
				}
			}
			if (only == null || only.contains("ext")) {
				benchExt(ctx, false);
				benchExt(ctx, true);
			}
			if (only == null || only.contains("empty")) {
				benchEmpty(ctx);
			}
			if (only == null || only.contains("e2e")) {
				benchE2e(ctx);
				benchE2eEvents(ctx);
			}
			if (only == null || only.contains("call")) {
				benchCall();
			}
			if (only == null || only.contains("ring")) {
				benchRing();
			}
		}
		System.err.println("CqBench: done (sink " + sink + ")");
	}

	static long allocated() {
		return THREADS.getCurrentThreadAllocatedBytes();
	}

	// ------------------------------------------------------------------ reporting

	/**
	 * Prints one result line: median, min and max of {@code v} (also used by the
	 * starter's benchmark).
	 */
	public static void report(String name, String extra, String unit, double[] v) {
		double[] s = v.clone();
		Arrays.sort(s);
		int n = s.length;
		double median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
		// one write(2) for the whole line: a peer process printing to the same file
		// cannot split it (printf wrote it in pieces)
		System.out
			.print(String.format(Locale.ROOT, "case=%s%s impl=java unit=%s median=%.2f min=%.2f max=%.2f reps=%d%n",
					name, extra, unit, median, s[0], s[n - 1], n));
		System.out.flush();
	}

	// ------------------------------------------------------------------ filling a CQ
	// with K send completions

	/** Handler of the single-completion path: reads what the C loop reads. */
	static final class SumHandler implements CompletionHandler {

		long sum;

		final boolean byteLen;

		SumHandler(boolean byteLen) {
			this.byteLen = byteLen;
		}

		@Override
		public void onCompletion(WorkCompletion c) {
			sum += c.wrId() + c.statusCode() + (byteLen ? c.byteLen() : 0);
		}

	}

	/**
	 * K receives, K signaled sends, wait for the K receives, pause for the last ACKs. Not
	 * timed.
	 */
	static void fill(Loopback lb, CompletionQueue recvCq, WorkCompletionBuffer rbuf) throws InterruptedException {
		for (int i = 0; i < k; i++) {
			lb.postRecv(i, i);
		}
		for (int i = 0; i < k; i++) {
			lb.postSend(i, i, MSG_LEN, null);
		}
		int got = 0;
		long deadline = System.nanoTime() + 60_000_000_000L;
		while (got < k) {
			int n = recvCq.poll(rbuf);
			for (int i = 0; i < n; i++) {
				if (!rbuf.get(i).isSuccess()) {
					throw new IllegalStateException("receive completion " + rbuf.get(i).status());
				}
			}
			got += n;
			if (System.nanoTime() > deadline) {
				throw new IllegalStateException("fill: timeout waiting for receives (" + got + " of " + k + ")");
			}
		}
		Thread.sleep(20);
	}

	/**
	 * Drain modes: the binding's two, and RAW (diagnosis: its poll_cq downcall and plain
	 * reads, no binding).
	 */
	enum Mode {

		BATCH, HANDLER, RAW

	}

	/**
	 * Times draining K completions; returns {ns per completion, allocated bytes per
	 * completion}.
	 */
	static double[] drain(CompletionQueue cq, WorkCompletionBuffer buf, Mode mode, SumHandler handler) {
		ExtendedCompletionQueue x = cq instanceof ExtendedCompletionQueue e ? e : null;
		if (x != null && mode == Mode.RAW) {
			throw new IllegalArgumentException("no raw loop for the extended CQ");
		}
		// RAW only (created before the allocation counter is read): the provider's
		// poll_cq and the ibv_wc array
		boolean raw = mode == Mode.RAW;
		MemorySegment fn = raw ? BenchAccess.pollFn(cq) : null;
		long cqAddress = BenchAccess.cqAddress(cq);
		long wcs = BenchAccess.wcs(buf);
		MemorySegment w = raw ? MemorySegment.ofAddress(wcs).reinterpret(BenchAccess.WC_SIZE * buf.capacity()) : null;
		long empties = 0;
		batchSum = 0;
		int got = 0;
		long a0 = allocated();
		long t0 = System.nanoTime();
		while (got < k) {
			// Every arm is a call site of its own, with its own JIT profile (one shared
			// `cq.poll` call mixed the
			// CQ kinds), and each calls a small method per poll that C2 compiles as an
			// application's poll path;
			// this loop itself runs only once per repetition and may stay in C1's
			// profiled code.
			int n;
			if (x == null) {
				n = switch (mode) {
					case BATCH -> pollBatch(cq, buf);
					case HANDLER -> cq.poll(buf, handler);
					case RAW -> pollRaw(fn, cqAddress, buf.capacity(), wcs, w);
				};
			}
			else {
				n = mode == Mode.BATCH ? pollExtCopy(x, buf) : x.poll(buf, handler);
			}
			if (n == 0) {
				empties++;
			}
			got += n;
		}
		long t1 = System.nanoTime();
		long a1 = allocated();
		sink += batchSum;
		if (empties > 0) {
			System.err.println("CqBench: " + empties + " empty polls during a drain");
		}
		return new double[] { (double) (t1 - t0) / k, (double) (a1 - a0) / k };
	}

	/**
	 * Sum of what the batch-reading polls read (the handler modes sum in their handler).
	 */
	static long batchSum;

	static int pollBatch(CompletionQueue cq, WorkCompletionBuffer buf) {
		int n = cq.poll(buf);
		batchSum += sumOf(buf, n);
		return n;
	}

	/**
	 * The same for the extended CQ: a separate method so that its `poll` call site sees
	 * one CQ kind.
	 */
	static int pollExtCopy(ExtendedCompletionQueue cq, WorkCompletionBuffer buf) {
		int n = cq.poll(buf);
		batchSum += sumOf(buf, n);
		return n;
	}

	static long sumOf(WorkCompletionBuffer buf, int n) {
		long sum = 0;
		for (int i = 0; i < n; i++) {
			WorkCompletion c = buf.get(i);
			sum += c.wrId() + c.statusCode();
		}
		return sum;
	}

	/**
	 * Diagnosis: the binding's poll_cq downcall and plain segment reads, without the
	 * binding around them.
	 */
	static int pollRaw(MemorySegment fn, long cqAddress, int capacity, long wcs, MemorySegment w) {
		int n = rawPoll(fn, cqAddress, capacity, wcs);
		long sum = 0;
		for (int i = 0; i < n; i++) {
			long base = i * BenchAccess.WC_SIZE;
			sum += w.get(JAVA_LONG, base + BenchAccess.WC_WR_ID) + w.get(JAVA_INT, base + BenchAccess.WC_STATUS);
		}
		batchSum += sum;
		return n;
	}

	/** What refills the CQ with K completions before each timed drain (not timed). */
	interface Filler {

		void fill() throws InterruptedException;

	}

	/**
	 * The device's drains: K send completions of a self-connected RC QP per repetition.
	 */
	static void runDeviceDrains(Context ctx, CompletionQueue scq, CompletionQueue rcq, int batch, Mode mode,
			boolean byteLen, String name, String allocName) throws InterruptedException {
		try (Loopback lb = new Loopback(ctx, scq, rcq, k, SLOT);
				WorkCompletionBuffer rbuf = new WorkCompletionBuffer(32)) {
			runDrains(scq, () -> fill(lb, rcq, rbuf), batch, mode, byteLen, name, allocName);
		}
	}

	static void runDrains(CompletionQueue scq, Filler filler, int batch, Mode mode, boolean byteLen, String name,
			String allocName) throws InterruptedException {
		double[] ns = new double[reps];
		double[] bytes = new double[reps];
		SumHandler handler = new SumHandler(byteLen);
		try (WorkCompletionBuffer buf = new WorkCompletionBuffer(batch)) {
			Repetitions rep = new Repetitions(name, warmup, reps);
			while (rep.next()) {
				filler.fill();
				double[] m = drain(scq, buf, mode, handler);
				if (rep.measured()) {
					ns[rep.index()] = m[0];
					bytes[rep.index()] = m[1];
				}
			}
		}
		sink += handler.sum;
		report(name, " batch=" + batch, "ns", ns);
		if (allocName != null) { // the diagnosis loops allocate their segments once per
									// drain: not reported
			report("alloc", " of=" + allocName + " batch=" + batch, "B_per_completion", bytes);
		}
	}

	// ------------------------------------------------------------------ (1) batch poll,
	// legacy CQ

	static void benchLegacy(Context ctx, int batch) throws InterruptedException {
		for (Mode mode : Mode.values()) {
			try (CompletionQueue scq = ctx.createCompletionQueue(k, null, 0);
					CompletionQueue rcq = ctx.createCompletionQueue(k, null, 0)) {
				runDeviceDrains(ctx, scq, rcq, batch, mode, false, switch (mode) {
					case BATCH -> "batch_poll";
					case HANDLER -> "batch_handler";
					case RAW -> "diag_raw_batch";
				}, switch (mode) {
					case BATCH -> "legacy_batch";
					case HANDLER -> "legacy_handler";
					case RAW -> null;
				});
			}
		}
	}

	static int rawPoll(MemorySegment fn, long cq, int n, long wcs) {
		try {
			return (int) BenchAccess.POLL_CQ.invokeExact(fn, cq, n, wcs);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	// ------------------------------------------------------------------ (1b) extended CQ

	static void benchExt(Context ctx, boolean copy) throws InterruptedException {
		try (ExtendedCompletionQueue scq = ctx.createExtendedCompletionQueue(CqInitAttributes.of(k));
				CompletionQueue rcq = ctx.createCompletionQueue(k, null, 0)) {
			if (!scq.usesBatchIterator()) {
				System.err.println("CqBench: extended CQ polls one completion per start_poll..end_poll (rxe < 59)");
			}
			runDeviceDrains(ctx, scq, rcq, 32, copy ? Mode.BATCH : Mode.HANDLER, !copy, copy ? "ext_copy" : "ext_iter",
					copy ? "ext_batch" : "ext_handler");
		}
	}

	// ------------------------------------------------------------------ (2) empty poll

	static void benchEmpty(Context ctx) {
		try (CompletionQueue cq = ctx.createCompletionQueue(64, null, 0);
				ExtendedCompletionQueue x = ctx.createExtendedCompletionQueue(CqInitAttributes.of(64))) {
			emptyRows(cq, x, "empty_poll", "diag_raw_empty", "empty_ext");
		}
	}

	/**
	 * The empty-poll rows on {@code cq} (binding, then its raw downcall) and {@code x}.
	 */
	static void emptyRows(CompletionQueue cq, ExtendedCompletionQueue x, String name, String rawName, String extName) {
		double[] v = new double[reps];
		try (WorkCompletionBuffer buf = new WorkCompletionBuffer(16)) {
			Repetitions rep = new Repetitions(name, warmup, reps);
			while (rep.next()) {
				int total = 0;
				long t0 = System.nanoTime();
				for (int i = 0; i < emptyIters; i++) {
					total += cq.poll(buf);
				}
				long t1 = System.nanoTime();
				if (total != 0) {
					throw new IllegalStateException("the empty CQ was not empty");
				}
				if (rep.measured()) {
					v[rep.index()] = (double) (t1 - t0) / emptyIters;
				}
			}
			report(name, " batch=16", "ns", v);
			MemorySegment fn = BenchAccess.pollFn(cq);
			long cqAddress = BenchAccess.cqAddress(cq);
			long wcs = BenchAccess.wcs(buf);
			rep = new Repetitions(rawName, warmup, reps);
			while (rep.next()) {
				int total = 0;
				long t0 = System.nanoTime();
				for (int i = 0; i < emptyIters; i++) {
					total += rawPoll(fn, cqAddress, 16, wcs);
				}
				long t1 = System.nanoTime();
				if (total != 0) {
					throw new IllegalStateException("the empty CQ was not empty");
				}
				if (rep.measured()) {
					v[rep.index()] = (double) (t1 - t0) / emptyIters;
				}
			}
			report(rawName, " batch=16", "ns", v);
		}
		SumHandler handler = new SumHandler(false);
		try (WorkCompletionBuffer buf = new WorkCompletionBuffer(32)) {
			Repetitions rep = new Repetitions(extName, warmup, reps);
			while (rep.next()) {
				int total = 0;
				long t0 = System.nanoTime();
				for (int i = 0; i < emptyIters; i++) {
					total += x.poll(buf, handler);
				}
				long t1 = System.nanoTime();
				if (total != 0) {
					throw new IllegalStateException("the empty extended CQ was not empty");
				}
				if (rep.measured()) {
					v[rep.index()] = (double) (t1 - t0) / emptyIters;
				}
			}
		}
		report(extName, " batch=32", "ns", v);
	}

	// ------------------------------------------------------------------ diagnosis: the
	// same polls without a device

	static final MethodHandle RING_CREATE;
	static final MethodHandle RING_FILL;
	static final MethodHandle RING_DESTROY;

	/**
	 * ring_destroy_cq: ibv_destroy_cq's signature, what the binding's CQ object over a
	 * ring calls when closed.
	 */
	static final MemorySegment RING_DESTROY_CQ;

	static {
		String lib = System.getenv("CQ_BENCH_RING_LIB");
		if (lib == null || lib.isEmpty()) {
			RING_CREATE = RING_FILL = RING_DESTROY = null;
			RING_DESTROY_CQ = MemorySegment.NULL;
		}
		else {
			Linker linker = Linker.nativeLinker();
			SymbolLookup ring = SymbolLookup.libraryLookup(Path.of(lib), Arena.global());
			RING_CREATE = linker.downcallHandle(ring.findOrThrow("ring_create"),
					FunctionDescriptor.of(JAVA_LONG, JAVA_INT));
			RING_FILL = linker.downcallHandle(ring.findOrThrow("ring_fill"),
					FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT));
			RING_DESTROY = linker.downcallHandle(ring.findOrThrow("ring_destroy"),
					FunctionDescriptor.ofVoid(JAVA_LONG));
			RING_DESTROY_CQ = ring.findOrThrow("ring_destroy_cq");
		}
	}

	/**
	 * The ring_* rows: batch_poll (and the handler and raw variants), ext_iter, ext_copy
	 * and the empty polls with the same loops as the device rows, through the binding's
	 * own poll paths, on the device-less completion ring of libcqbench_ring.so
	 * ($CQ_BENCH_RING_LIB), which cq_bench polls with the same loops in C.
	 */
	static void benchRing() throws Throwable {
		if (RING_CREATE == null) {
			throw new IllegalStateException("CQ_BENCH_RING_LIB (path of libcqbench_ring.so) is not set");
		}
		long address = (long) RING_CREATE.invokeExact(k);
		if (address == 0) {
			throw new IllegalStateException("ring_create failed");
		}
		MemorySegment ring = MemorySegment.ofAddress(address);
		Filler refill = () -> ringFill(address, k);
		try {
			try (CompletionQueue cq = BenchAccess.ringQueue(ring, RING_DESTROY_CQ)) {
				for (int batch : new int[] { 1, 16, 32 }) {
					runDrains(cq, refill, batch, Mode.BATCH, false, "ring_batch_poll", null);
					runDrains(cq, refill, batch, Mode.HANDLER, false, "ring_batch_handler", null);
					runDrains(cq, refill, batch, Mode.RAW, false, "ring_raw_batch", null);
				}
			}
			try (ExtendedCompletionQueue x = BenchAccess.ringExtendedQueue(ring, CqInitAttributes.of(k),
					RING_DESTROY_CQ)) {
				runDrains(x, refill, 32, Mode.HANDLER, true, "ring_ext_iter", null);
				runDrains(x, refill, 32, Mode.BATCH, false, "ring_ext_copy", null);
			}
			try (CompletionQueue cq = BenchAccess.ringQueue(ring, RING_DESTROY_CQ);
					ExtendedCompletionQueue x = BenchAccess.ringExtendedQueue(ring, CqInitAttributes.of(k),
							RING_DESTROY_CQ)) {
				emptyRows(cq, x, "ring_empty_poll", "ring_raw_empty", "ring_empty_ext");
			}
		}
		finally {
			RING_DESTROY.invokeExact(address);
		}
	}

	static void ringFill(long ring, int n) {
		try {
			RING_FILL.invokeExact(ring, n);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Every message through the event path, as cq_bench's e2e_events: get the event
	 * (waiting for it), ack, arm, drain until empty, then post the next message.
	 */
	static void benchE2eEvents(Context ctx) {
		pingPong(ctx, "e2e_events", "e2e_events_loop", CqBench::eventPerMessage);
	}

	/** One repetition of e2e_events; returns the events got. */
	static long eventPerMessage(CompletionChannel ch, CompletionQueue cq, Loopback lb, Waker waker,
			WorkCompletionBuffer buf) {
		long events = 0;
		int msgs = 0;
		int sent = 0;
		int sendsDone = 0;
		cq.requestNotify(false);
		lb.postSend(sent, sent % E2E_DEPTH, MSG_LEN, null);
		sent++;
		while (msgs < e2eMsgs || sendsDone < sent) {
			// the blocking ibv_get_cq_event of the C loop: the binding's get-or-wait
			// (with timeout and waker)
			CompletionQueue fired = ch.getEvent(5_000_000_000L, waker);
			if (fired == null) {
				throw new IllegalStateException("e2e_events: no completion event within 5 s");
			}
			fired.ackEvents();
			events++;
			cq.requestNotify(false);
			int toSend = 0;
			int n;
			while ((n = cq.poll(buf)) > 0) {
				for (int i = 0; i < n; i++) {
					if (pingPongCompletion(buf.get(i), lb)) {
						msgs++;
						toSend++;
					}
					else {
						sendsDone++;
					}
				}
			}
			for (; toSend > 0 && sent < e2eMsgs; toSend--) {
				lb.postSend(sent, sent % E2E_DEPTH, MSG_LEN, null);
				sent++;
			}
		}
		return events;
	}

	// ------------------------------------------------------------------ diagnosis: the
	// fixed cost of a call

	/**
	 * ns per critical downcall of bench_nop (the C side calls it through a function
	 * pointer).
	 */
	static void benchCall() {
		String lib = System.getenv("CQ_BENCH_NOP_LIB");
		if (lib == null || lib.isEmpty()) {
			throw new IllegalStateException("CQ_BENCH_NOP_LIB (path of libcqbench_nop.so) is not set");
		}
		MemorySegment fn = SymbolLookup.libraryLookup(Path.of(lib), Arena.global()).findOrThrow("bench_nop");
		double[] v = new double[reps];
		try (Arena arena = Arena.ofConfined()) {
			long wcs = arena.allocate(BenchAccess.WC_SIZE * 16, 8).address();
			Repetitions rep = new Repetitions("diag_call", warmup, reps);
			while (rep.next()) {
				int total = 0;
				long t0 = System.nanoTime();
				for (int i = 0; i < emptyIters; i++) {
					total += nop(fn, wcs, 16, wcs);
				}
				long t1 = System.nanoTime();
				if (total != 0) {
					throw new IllegalStateException("bench_nop returned " + total);
				}
				if (rep.measured()) {
					v[rep.index()] = (double) (t1 - t0) / emptyIters;
				}
			}
		}
		report("diag_call", "", "ns", v);

		// diag_read: the binding's view reading wr_id and status of 32 completions
		// already in the buffer
		int rounds = Math.max(1, emptyIters / 32);
		try (WorkCompletionBuffer buf = new WorkCompletionBuffer(32)) {
			BenchAccess.fill(buf, 32);
			Repetitions rep = new Repetitions("diag_read", warmup, reps);
			while (rep.next()) {
				long sum = 0;
				long t0 = System.nanoTime();
				for (int j = 0; j < rounds; j++) {
					BenchAccess.setWrId(buf, j & 31, j); // the memory changes between
															// rounds, as after a poll
					sum += readBatch(buf);
				}
				long t1 = System.nanoTime();
				sink += sum;
				if (rep.measured()) {
					v[rep.index()] = (double) (t1 - t0) / ((double) rounds * 32);
				}
			}
		}
		report("diag_read", " batch=32", "ns", v);
	}

	static long readBatch(WorkCompletionBuffer buf) {
		long sum = 0;
		for (int i = 0, n = buf.size(); i < n; i++) {
			WorkCompletion c = buf.get(i);
			sum += c.wrId() + c.statusCode();
		}
		return sum;
	}

	static int nop(MemorySegment fn, long a, int n, long b) {
		try {
			return (int) NOP.invokeExact(fn, a, n, b);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	// ------------------------------------------------------------------ (3) end to end:
	// ping-pong with events

	/**
	 * The binding's event loop: drain; arm; drain; wait (poll(2)); get event; ack;
	 * repeat.
	 */
	static void benchE2e(Context ctx) {
		pingPong(ctx, "e2e", "e2e_event_loop", CqBench::eventLoop);
	}

	/** One repetition of e2e; returns the events got. */
	static long eventLoop(CompletionChannel ch, CompletionQueue cq, Loopback lb, Waker waker,
			WorkCompletionBuffer buf) {
		long events = 0;
		int msgs = 0;
		int sent = 0;
		int sendsDone = 0;
		lb.postSend(sent, sent % E2E_DEPTH, MSG_LEN, null);
		sent++;
		while (msgs < e2eMsgs || sendsDone < sent) {
			int n = cq.poll(buf);
			if (n == 0) {
				cq.requestNotify(false);
				n = cq.poll(buf);
				if (n == 0) {
					if (ch.await(5_000_000_000L, waker) == CompletionChannel.WaitResult.READY) {
						CompletionQueue fired = ch.getEvent();
						if (fired != null) {
							fired.ackEvents();
							events++;
						}
					}
					continue;
				}
			}
			for (int i = 0; i < n; i++) {
				if (pingPongCompletion(buf.get(i), lb)) {
					msgs++;
					if (sent < e2eMsgs) {
						lb.postSend(sent, sent % E2E_DEPTH, MSG_LEN, null);
						sent++;
					}
				}
				else {
					sendsDone++;
				}
			}
		}
		return events;
	}

	/**
	 * A ping-pong completion, as cq_bench's ping_pong_completion: a receive is posted
	 * again (true), a send only counted by the caller (false).
	 */
	static boolean pingPongCompletion(WorkCompletion c, Loopback lb) {
		if (!c.isSuccess()) {
			throw new IllegalStateException("ping-pong completion " + c.status());
		}
		if (c.opcodeCode() != RECV_OPCODE) {
			return false;
		}
		long id = c.wrId();
		lb.postRecv(id, (int) (id - RECV_ID_BASE));
		return true;
	}

	/**
	 * One repetition of a ping-pong on one CQ with a channel for the sends and receives
	 * of a self-connected QP: e2eMsgs messages, one in flight; returns the completion
	 * events it got.
	 */
	interface Exchange {

		long run(CompletionChannel ch, CompletionQueue cq, Loopback lb, Waker waker, WorkCompletionBuffer buf);

	}

	/**
	 * The repetitions of a ping-pong case, their messages per second and the polling
	 * thread's bytes per message.
	 */
	static void pingPong(Context ctx, String name, String allocOf, Exchange exchange) {
		double[] v = new double[reps];
		double[] bytes = new double[reps];
		long events = 0;
		long runs;
		try (CompletionChannel ch = ctx.createCompletionChannel();
				CompletionQueue cq = ctx.createCompletionQueue(4 * E2E_DEPTH, ch, 0);
				Loopback lb = new Loopback(ctx, cq, cq, E2E_DEPTH, SLOT);
				Waker waker = new Waker();
				WorkCompletionBuffer buf = new WorkCompletionBuffer(16)) {
			for (int i = 0; i < E2E_DEPTH; i++) {
				lb.postRecv(RECV_ID_BASE + i, i);
			}
			Repetitions rep = new Repetitions(name, warmup, reps);
			while (rep.next()) {
				long a0 = allocated();
				long t0 = System.nanoTime();
				events += exchange.run(ch, cq, lb, waker, buf);
				long t1 = System.nanoTime();
				long a1 = allocated();
				if (rep.measured()) {
					v[rep.index()] = e2eMsgs * 1e9 / (t1 - t0);
					bytes[rep.index()] = (double) (a1 - a0) / e2eMsgs;
				}
			}
			runs = rep.total();
		}
		System.err.println("CqBench: " + name + ": " + events + " events for " + runs * e2eMsgs + " messages");
		report(name, "", "msgs_per_s", v);
		report("alloc", " of=" + allocOf, "B_per_message", bytes);
	}

}
