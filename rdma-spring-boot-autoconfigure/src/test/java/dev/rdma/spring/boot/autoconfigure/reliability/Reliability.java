package dev.rdma.spring.boot.autoconfigure.reliability;

import java.util.Locale;

/**
 * Sizes and helpers of the reliability tests (issue 7).
 *
 * <p>
 * Sizes: the device tier runs a reduced size by default so that {@code scripts/test} (and
 * {@code .ci/run}) stays well under its budget inside the emulated VM.
 * {@code RDMA_RELIABILITY_FULL=1} (environment) or {@code -Drdma.reliability.full=true}
 * selects the full size (1 000 000 completions per polling mode);
 * {@code RDMA_RELIABILITY_COMPLETIONS=<n>} / {@code -Drdma.reliability.completions=<n>}
 * sets any size.
 */
final class Reliability {

	static final int REDUCED_COMPLETIONS = 20_000;
	static final int FULL_COMPLETIONS = 1_000_000;

	private Reliability() {
	}

	static boolean full() {
		return "1".equals(System.getenv("RDMA_RELIABILITY_FULL"))
				|| "true".equalsIgnoreCase(System.getenv("RDMA_RELIABILITY_FULL"))
				|| Boolean.getBoolean("rdma.reliability.full");
	}

	/** Completions per polling mode in the load test (all four queues together). */
	static int completions() {
		String explicit = System.getProperty("rdma.reliability.completions",
				System.getenv("RDMA_RELIABILITY_COMPLETIONS"));
		if (explicit != null && !explicit.isBlank()) {
			return Integer.parseInt(explicit.trim().replace("_", ""));
		}
		return full() ? FULL_COMPLETIONS : REDUCED_COMPLETIONS;
	}

	/** Number of random property sets for the hostile-configuration generator. */
	static int hostileSets(int reduced, int full) {
		String explicit = System.getProperty("rdma.reliability.hostile-sets",
				System.getenv("RDMA_RELIABILITY_HOSTILE_SETS"));
		if (explicit != null && !explicit.isBlank()) {
			return Integer.parseInt(explicit.trim());
		}
		return full() ? full : reduced;
	}

	static long seed() {
		String explicit = System.getProperty("rdma.reliability.seed", System.getenv("RDMA_RELIABILITY_SEED"));
		return explicit == null || explicit.isBlank() ? 7L : Long.parseLong(explicit.trim());
	}

	static String lower(Enum<?> e) {
		return e.name().toLowerCase(Locale.ROOT);
	}

	/**
	 * One line per measured figure, grep-able in the device-tier log:
	 * {@code RELIABILITY key=value ...}.
	 */
	static void report(String scenario, Object... keyValues) {
		StringBuilder line = new StringBuilder("RELIABILITY ").append(scenario);
		for (int i = 0; i + 1 < keyValues.length; i += 2) {
			line.append(' ').append(keyValues[i]).append('=').append(keyValues[i + 1]);
		}
		System.out.println(line);
	}

	static String messages(Throwable failure) {
		StringBuilder all = new StringBuilder();
		for (Throwable t = failure; t != null; t = t.getCause()) {
			all.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage()).append('\n');
			StackTraceElement[] frames = t.getStackTrace();
			for (int i = 0; i < Math.min(4, frames.length); i++) {
				all.append("        at ").append(frames[i]).append('\n');
			}
		}
		return all.toString();
	}

}
