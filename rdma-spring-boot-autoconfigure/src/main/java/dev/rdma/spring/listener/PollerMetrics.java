package dev.rdma.spring.listener;

import org.jspecify.annotations.Nullable;

/**
 * What a poller reports, once per poll batch (never per completion). Implementations must
 * not keep the arrays they are handed.
 */
public interface PollerMetrics {

	/**
	 * A metrics sink that records nothing; a poller with it does not even read the clock
	 * for its batches.
	 */
	PollerMetrics NONE = new PollerMetrics() {
	};

	/**
	 * One poll returned {@code size} completions.
	 * @param statusCounts completions per {@code WcStatus} ordinal in this batch (read
	 * only)
	 */
	default void batch(int size, long[] statusCounts) {
	}

	/**
	 * The listener calls of one batch took {@code nanos}; {@code failures} of them threw,
	 * the first with {@code firstFailure} (null when none did).
	 */
	default void listener(long nanos, int failures, @Nullable Throwable firstFailure) {
	}

	/** {@code count} completion events were got for the queue. */
	default void events(long count) {
	}

	/** {@code count} events were acknowledged. */
	default void acks(long count) {
	}

	/**
	 * A completion event of the queue never came: the poller's periodic re-poll of the
	 * armed queue found its completions, and no event arrived afterwards either.
	 */
	default void missedEvent() {
	}

	/** Polling the queue failed (e.g. the CQ went to the error state). */
	default void pollError(Throwable error) {
	}

	/** Creates the {@link PollerMetrics} of each queue. */
	@FunctionalInterface
	interface Factory {

		Factory NONE = queue -> PollerMetrics.NONE;

		PollerMetrics forQueue(String queue);

	}

}
