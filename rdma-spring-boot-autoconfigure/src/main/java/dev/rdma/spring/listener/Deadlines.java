package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * {@link System#nanoTime()} deadlines and nanosecond counts of a {@link Duration} that
 * saturate instead of overflowing: {@code Duration.toNanos()} throws
 * {@link ArithmeticException} beyond about 292 years, and {@code nanoTime() + nanos}
 * wraps around long before. A stop path must never throw for a long timeout.
 */
public final class Deadlines {

	/**
	 * The longest wait a deadline stands for (about 73 years): far enough that
	 * {@code deadline - System.nanoTime()} never wraps.
	 */
	private static final long MAX_NANOS = Long.MAX_VALUE / 4;

	private Deadlines() {
	}

	/**
	 * The nanoseconds of {@code duration}, at most {@link Long#MAX_VALUE} (a negative
	 * duration: at least {@link Long#MIN_VALUE}).
	 */
	public static long nanos(Duration duration) {
		return TimeUnit.NANOSECONDS.convert(duration);
	}

	/**
	 * The {@link System#nanoTime()} at which {@code timeout} from now ends, a very long
	 * timeout ending in about 73 years rather than in the past.
	 */
	public static long after(Duration timeout) {
		return System.nanoTime() + Math.clamp(nanos(timeout), -MAX_NANOS, MAX_NANOS);
	}

}
