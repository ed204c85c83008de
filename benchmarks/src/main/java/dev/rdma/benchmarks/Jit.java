package dev.rdma.benchmarks;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

/**
 * Lets the JIT settle between the warm-up and the measured repetitions. In the Soft-RoCE VM (single-threaded TCG)
 * both vCPUs share one host thread, so a C2 compilation still running on the other vCPU halves the speed of the
 * measured thread: a repetition measured then is about 2x slower than its neighbours (seen as bimodal spreads).
 */
public final class Jit {

    private static final CompilationMXBean COMPILER = ManagementFactory.getCompilationMXBean();
    private static final long QUIET_MILLIS = 1000;
    private static final long MAX_WAIT_MILLIS = 30_000;

    private Jit() {
    }

    /** The JIT's total compilation time so far, in milliseconds (-1 when the JVM does not monitor it). */
    public static long compilationMillis() {
        return COMPILER == null || !COMPILER.isCompilationTimeMonitoringSupported() ? -1
                : COMPILER.getTotalCompilationTime();
    }

    /** Waits until the JIT's total compilation time stopped growing for a second (at most 30 s). */
    public static void awaitQuiet() {
        if (COMPILER == null || !COMPILER.isCompilationTimeMonitoringSupported()) {
            return;
        }
        long deadline = System.currentTimeMillis() + MAX_WAIT_MILLIS;
        long last = COMPILER.getTotalCompilationTime();
        long quietSince = System.currentTimeMillis();
        while (System.currentTimeMillis() - quietSince < QUIET_MILLIS) {
            if (System.currentTimeMillis() > deadline) {
                System.err.println("Jit: still compiling after " + MAX_WAIT_MILLIS + " ms; measuring anyway");
                return;
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            long now = COMPILER.getTotalCompilationTime();
            if (now != last) {
                last = now;
                quietSince = System.currentTimeMillis();
            }
        }
    }
}
