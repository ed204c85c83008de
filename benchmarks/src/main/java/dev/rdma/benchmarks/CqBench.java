package dev.rdma.benchmarks;

import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.Locale;

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

/**
 * The Java twin of {@code src/main/c/cq_bench.c}: the same cases, parameters, warm-up and repetitions, through the
 * binding. Prints one machine-readable line per case ({@code case=... impl=java unit=... median=... min=... max=...})
 * plus the allocation of the polling thread per completion ({@code case=alloc}). See docs/benchmarks.md.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp ... dev.rdma.benchmarks.CqBench [K R W EMPTY_ITERS E2E_MSGS]</pre>
 */
public final class CqBench {

    static final int SLOT = 64;
    static final int MSG_LEN = 16;
    static final int E2E_DEPTH = 16;
    static final long RECV_ID_BASE = 1_000_000;

    static int k = 4096;
    static int reps = 7;
    static int warmup = 3;
    static int emptyIters = 200_000;
    static int e2eMsgs = 2000;

    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    static long sink;

    private CqBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) k = Integer.parseInt(args[0]);
        if (args.length > 1) reps = Integer.parseInt(args[1]);
        if (args.length > 2) warmup = Integer.parseInt(args[2]);
        if (args.length > 3) emptyIters = Integer.parseInt(args[3]);
        if (args.length > 4) e2eMsgs = Integer.parseInt(args[4]);
        String only = System.getenv("CQ_BENCH_CASES");
        THREADS.setThreadAllocatedMemoryEnabled(true);
        allocated(); // first call initialises what it needs
        System.out.printf(Locale.ROOT, "# impl=java K=%d reps=%d warmup=%d empty_iters=%d e2e_msgs=%d jvm=%s %s%n",
                k, reps, warmup, emptyIters, e2eMsgs, Runtime.version(),
                ManagementFactory.getRuntimeMXBean().getInputArguments());
        try (Context ctx = DeviceTestSupport.openContext()) {
            System.err.println("CqBench: device " + ctx.deviceName());
            if (only == null || only.contains("batch")) {
                for (int batch : new int[] {1, 16, 32}) {
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
            }
        }
        System.err.println("CqBench: done (sink " + sink + ")");
    }

    static long allocated() {
        return THREADS.getCurrentThreadAllocatedBytes();
    }

    // ------------------------------------------------------------------ reporting

    static void report(String name, String extra, String unit, double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        double median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
        System.out.printf(Locale.ROOT, "case=%s%s impl=java unit=%s median=%.2f min=%.2f max=%.2f reps=%d%n", name,
                extra, unit, median, s[0], s[n - 1], n);
        System.out.flush();
    }

    // ------------------------------------------------------------------ filling a CQ with K send completions

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

    /** K receives, K signaled sends, wait for the K receives, pause for the last ACKs. Not timed. */
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

    /** Drain modes. */
    enum Mode { BATCH, HANDLER }

    /** Times draining K completions; returns {ns per completion, allocated bytes per completion}. */
    static double[] drain(CompletionQueue cq, WorkCompletionBuffer buf, Mode mode, SumHandler handler) {
        long sum = 0;
        int got = 0;
        long empties = 0;
        long a0 = allocated();
        long t0 = System.nanoTime();
        if (mode == Mode.BATCH) {
            while (got < k) {
                int n = cq.poll(buf);
                if (n == 0) {
                    empties++;
                }
                for (int i = 0; i < n; i++) {
                    WorkCompletion c = buf.get(i);
                    sum += c.wrId() + c.statusCode();
                }
                got += n;
            }
        } else {
            while (got < k) {
                int n = cq.poll(buf, handler);
                if (n == 0) {
                    empties++;
                }
                got += n;
            }
        }
        long t1 = System.nanoTime();
        long a1 = allocated();
        sink += sum;
        if (empties > 0) {
            System.err.println("CqBench: " + empties + " empty polls during a drain");
        }
        return new double[] {(double) (t1 - t0) / k, (double) (a1 - a0) / k};
    }

    static void runDrains(Context ctx, CompletionQueue scq, CompletionQueue rcq, int batch, Mode mode,
            boolean byteLen, String name, String allocName) throws InterruptedException {
        double[] ns = new double[reps];
        double[] bytes = new double[reps];
        SumHandler handler = new SumHandler(byteLen);
        try (Loopback lb = new Loopback(ctx, scq, rcq, k, SLOT);
                WorkCompletionBuffer buf = new WorkCompletionBuffer(batch);
                WorkCompletionBuffer rbuf = new WorkCompletionBuffer(32)) {
            for (int r = 0; r < warmup + reps; r++) {
                fill(lb, rcq, rbuf);
                double[] m = drain(scq, buf, mode, handler);
                if (r >= warmup) {
                    ns[r - warmup] = m[0];
                    bytes[r - warmup] = m[1];
                }
            }
        }
        sink += handler.sum;
        report(name, " batch=" + batch, "ns", ns);
        report("alloc", " of=" + allocName + " batch=" + batch, "B_per_completion", bytes);
    }

    // ------------------------------------------------------------------ (1) batch poll, legacy CQ

    static void benchLegacy(Context ctx, int batch) throws InterruptedException {
        for (Mode mode : Mode.values()) {
            try (CompletionQueue scq = ctx.createCompletionQueue(k, null, 0);
                    CompletionQueue rcq = ctx.createCompletionQueue(k, null, 0)) {
                runDrains(ctx, scq, rcq, batch, mode, false, mode == Mode.BATCH ? "batch_poll" : "batch_handler",
                        mode == Mode.BATCH ? "legacy_batch" : "legacy_handler");
            }
        }
    }

    // ------------------------------------------------------------------ (1b) extended CQ

    static void benchExt(Context ctx, boolean copy) throws InterruptedException {
        try (ExtendedCompletionQueue scq = ctx.createExtendedCompletionQueue(CqInitAttributes.of(k));
                CompletionQueue rcq = ctx.createCompletionQueue(k, null, 0)) {
            if (!scq.usesBatchIterator()) {
                System.err.println("CqBench: extended CQ polls one completion per start_poll..end_poll (rxe < 59)");
            }
            runDrains(ctx, scq, rcq, 32, copy ? Mode.BATCH : Mode.HANDLER, !copy, copy ? "ext_copy" : "ext_iter",
                    copy ? "ext_batch" : "ext_handler");
        }
    }

    // ------------------------------------------------------------------ (2) empty poll

    static void benchEmpty(Context ctx) {
        double[] v = new double[reps];
        try (CompletionQueue cq = ctx.createCompletionQueue(64, null, 0);
                WorkCompletionBuffer buf = new WorkCompletionBuffer(16)) {
            for (int r = 0; r < warmup + reps; r++) {
                int total = 0;
                long t0 = System.nanoTime();
                for (int i = 0; i < emptyIters; i++) {
                    total += cq.poll(buf);
                }
                long t1 = System.nanoTime();
                if (total != 0) {
                    throw new IllegalStateException("the empty CQ was not empty");
                }
                if (r >= warmup) {
                    v[r - warmup] = (double) (t1 - t0) / emptyIters;
                }
            }
        }
        report("empty_poll", " batch=16", "ns", v);
        SumHandler handler = new SumHandler(false);
        try (ExtendedCompletionQueue cq = ctx.createExtendedCompletionQueue(CqInitAttributes.of(64));
                WorkCompletionBuffer buf = new WorkCompletionBuffer(32)) {
            for (int r = 0; r < warmup + reps; r++) {
                int total = 0;
                long t0 = System.nanoTime();
                for (int i = 0; i < emptyIters; i++) {
                    total += cq.poll(buf, handler);
                }
                long t1 = System.nanoTime();
                if (total != 0) {
                    throw new IllegalStateException("the empty extended CQ was not empty");
                }
                if (r >= warmup) {
                    v[r - warmup] = (double) (t1 - t0) / emptyIters;
                }
            }
        }
        report("empty_ext", " batch=32", "ns", v);
    }

    // ------------------------------------------------------------------ (3) end to end: ping-pong with events

    /** The binding's event loop: drain; arm; drain; wait (poll(2)); get event; ack; repeat. */
    static void benchE2e(Context ctx) {
        double[] v = new double[reps];
        double[] bytes = new double[reps];
        long events = 0;
        try (CompletionChannel ch = ctx.createCompletionChannel();
                CompletionQueue cq = ctx.createCompletionQueue(4 * E2E_DEPTH, ch, 0);
                Loopback lb = new Loopback(ctx, cq, cq, E2E_DEPTH, SLOT);
                Waker waker = new Waker();
                WorkCompletionBuffer buf = new WorkCompletionBuffer(16)) {
            for (int i = 0; i < E2E_DEPTH; i++) {
                lb.postRecv(RECV_ID_BASE + i, i);
            }
            int recvOpcode = WcOpcode.RECV.code();
            for (int r = 0; r < warmup + reps; r++) {
                int msgs = 0;
                int sent = 0;
                int sendsDone = 0;
                long a0 = allocated();
                long t0 = System.nanoTime();
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
                        WorkCompletion c = buf.get(i);
                        if (!c.isSuccess()) {
                            throw new IllegalStateException("ping-pong completion " + c.status());
                        }
                        if (c.opcodeCode() == recvOpcode) {
                            msgs++;
                            long id = c.wrId();
                            lb.postRecv(id, (int) (id - RECV_ID_BASE));
                            if (sent < e2eMsgs) {
                                lb.postSend(sent, sent % E2E_DEPTH, MSG_LEN, null);
                                sent++;
                            }
                        } else {
                            sendsDone++;
                        }
                    }
                }
                long t1 = System.nanoTime();
                long a1 = allocated();
                if (r >= warmup) {
                    v[r - warmup] = e2eMsgs * 1e9 / (t1 - t0);
                    bytes[r - warmup] = (double) (a1 - a0) / e2eMsgs;
                }
            }
        }
        System.err.println("CqBench: e2e: " + events + " events for " + (warmup + reps) * e2eMsgs + " messages");
        report("e2e", "", "msgs_per_s", v);
        report("alloc", " of=e2e_event_loop", "B_per_message", bytes);
    }
}
