package dev.rdma.benchmarks;

/**
 * Latencies in nanoseconds in log-linear buckets (16 per power of two: about 6 %
 * resolution), the same buckets as {@code cq_group_bench.c}. {@link #record} allocates
 * nothing; one writer, other threads may read it racily (a benchmark's snapshot between
 * measurement windows).
 */
public final class LatencyHistogram {

	static final int SUB_BITS = 4;

	static final int SUB = 1 << SUB_BITS;

	/** Buckets up to 2^41 ns (about 37 minutes). */
	static final int BUCKETS = SUB + (41 - SUB_BITS) * SUB;

	private final long[] counts = new long[BUCKETS];

	/** Counts {@code nanos} (negative counts as 0, beyond the range as the last). */
	public void record(long nanos) {
		counts[index(nanos)]++;
	}

	static int index(long v) {
		if (v < SUB) {
			return (int) Math.max(0, v);
		}
		int msb = 63 - Long.numberOfLeadingZeros(v);
		int i = SUB + (msb - SUB_BITS) * SUB + (int) ((v >>> (msb - SUB_BITS)) & (SUB - 1));
		return Math.min(i, BUCKETS - 1);
	}

	/** The middle of bucket {@code i}, in nanoseconds. */
	static double value(int i) {
		if (i < SUB) {
			return i;
		}
		int m = (i - SUB) / SUB + SUB_BITS;
		int s = (i - SUB) % SUB;
		double lo = (double) (SUB + s) * (1L << (m - SUB_BITS));
		return lo + (1L << (m - SUB_BITS)) / 2.0;
	}

	public void clear() {
		java.util.Arrays.fill(counts, 0);
	}

	/** Adds the counts of {@code other}. */
	public void add(LatencyHistogram other) {
		for (int i = 0; i < BUCKETS; i++) {
			counts[i] += other.counts[i];
		}
	}

	/** Subtracts the counts of {@code earlier} (a snapshot of the same histograms). */
	public void subtract(LatencyHistogram earlier) {
		for (int i = 0; i < BUCKETS; i++) {
			counts[i] -= earlier.counts[i];
		}
	}

	/**
	 * The latency at fraction {@code q} (0..1) of the counts, in nanoseconds; NaN when
	 * empty.
	 */
	public double percentile(double q) {
		long total = 0;
		for (long c : counts) {
			total += c;
		}
		if (total <= 0) {
			return Double.NaN;
		}
		long rank = (long) Math.ceil(q * total);
		long seen = 0;
		for (int i = 0; i < BUCKETS; i++) {
			seen += counts[i];
			if (seen >= rank && counts[i] > 0) {
				return value(i);
			}
		}
		return value(BUCKETS - 1);
	}

}
