package dev.rdma.benchmarks;

import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Progress lines of a long benchmark under emulation, and a watchdog that ends the JVM
 * with every thread's stack when no progress line came for a while: a stalled benchmark
 * then says where it stalled instead of running into its step's budget silently.
 */
public final class Progress {

	private static volatile long last = System.nanoTime();

	private static volatile String prefix = "bench";

	private Progress() {
	}

	/**
	 * Prints {@code # <prefix> progress <seconds since the JVM's start>s: what} on stdout
	 * and feeds the watchdog.
	 */
	public static void line(String what) {
		last = System.nanoTime();
		System.out.printf(Locale.ROOT, "# %s progress %.1fs: %s%n", prefix,
				ManagementFactory.getRuntimeMXBean().getUptime() / 1e3, what);
	}

	/**
	 * Starts the watchdog (a daemon thread): after {@code stallSeconds} without a
	 * {@link #line}, it prints {@code # <prefix> Java benchmark failed: no progress ...}
	 * and every thread's stack on stdout and halts the JVM with status 3.
	 */
	public static void startWatchdog(String name, long stallSeconds) {
		prefix = name;
		last = System.nanoTime();
		Thread.ofPlatform().name(name + "-watchdog").daemon().start(() -> {
			while (true) {
				try {
					Thread.sleep(1000);
				}
				catch (InterruptedException ex) {
					return;
				}
				if (System.nanoTime() - last > TimeUnit.SECONDS.toNanos(stallSeconds)) {
					StringBuilder sb = new StringBuilder(
							"# " + name + " Java benchmark failed: no progress for " + stallSeconds + " s; threads:\n");
					Thread.getAllStackTraces().forEach((t, st) -> {
						sb.append("#   ").append(t.getName()).append(' ').append(t.getState()).append('\n');
						for (StackTraceElement e : st) {
							sb.append("#     at ").append(e).append('\n');
						}
					});
					System.out.print(sb);
					System.out.flush();
					Runtime.getRuntime().halt(3);
				}
			}
		});
	}

}
