package dev.rdma.benchmarks;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * Lets the JIT settle between the warm-up and the measured repetitions. In the Soft-RoCE
 * VM (single-threaded TCG) both vCPUs share one host thread, so a C2 compilation still
 * running on the other vCPU halves the speed of the measured thread: a repetition
 * measured then is about 2x slower than its neighbours (seen as bimodal spreads).
 *
 * <p>
 * The JIT is idle when no compilation is running or queued, as the {@code Compiler.queue}
 * diagnostic command (what {@code jcmd PID Compiler.queue} prints) reports it; the total
 * compilation time alone only changes when a compilation ends, so a long C2 compilation
 * in progress (seconds under emulation) went unnoticed.
 */
public final class Jit {

	private static final CompilationMXBean COMPILER = ManagementFactory.getCompilationMXBean();

	private static final long CHECK_MILLIS = 100;

	/** Idle checks in a row that count as settled. */
	private static final int IDLE_CHECKS = 5;

	private static final long MAX_WAIT_MILLIS = 60_000;

	private Jit() {
	}

	/**
	 * The JIT's total compilation time so far, in milliseconds (-1 when the JVM does not
	 * monitor it).
	 */
	public static long compilationMillis() {
		return COMPILER == null || !COMPILER.isCompilationTimeMonitoringSupported() ? -1
				: COMPILER.getTotalCompilationTime();
	}

	/**
	 * Waits until the JIT has been idle (nothing compiling, nothing queued) for
	 * {@value #IDLE_CHECKS} checks {@value #CHECK_MILLIS} ms apart, at most
	 * {@value #MAX_WAIT_MILLIS} ms.
	 */
	public static void awaitQuiet() {
		long deadline = System.currentTimeMillis() + MAX_WAIT_MILLIS;
		int idle = 0;
		String last = "";
		while (idle < IDLE_CHECKS) {
			if (System.currentTimeMillis() > deadline) {
				System.err.println("Jit: still compiling after " + MAX_WAIT_MILLIS + " ms; measuring anyway: " + last);
				return;
			}
			try {
				Thread.sleep(CHECK_MILLIS);
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				return;
			}
			last = compilerQueue();
			idle = isIdle(last) ? idle + 1 : 0;
		}
	}

	/** The output of the Compiler.queue diagnostic command ("" when it cannot be run). */
	public static String compilerQueue() {
		try {
			MBeanServer server = ManagementFactory.getPlatformMBeanServer();
			return (String) server.invoke(new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerQueue",
					null, null);
		}
		catch (JMException | RuntimeException e) {
			return "";
		}
	}

	/**
	 * Whether Compiler.queue's output shows no compilation: nothing under "Current
	 * compiles:" and every queue "Empty". Output it does not recognise counts as idle
	 * (the wait must end).
	 */
	static boolean isIdle(String queue) {
		String[] lines = queue.split("\n");
		for (int i = 0; i < lines.length; i++) {
			String line = lines[i].strip();
			if (line.startsWith("Current compiles:") && i + 1 < lines.length && !lines[i + 1].isBlank()) {
				return false;
			}
			if (line.endsWith("compile queue:") && i + 1 < lines.length && !lines[i + 1].strip().equals("Empty")) {
				return false;
			}
		}
		return true;
	}

}
