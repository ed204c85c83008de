package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * How the poller of one queue runs: its {@link PollingMode}, the most completions per
 * poll, the adaptive spin, the event ack batch and the backoff's longest sleep. An
 * immutable value: the starter builds it once from the queue's properties, a
 * {@code RdmaListenerContainerCustomizer} may give the container another one
 * ({@code container.setSettings(container.getSettings().withBatchSize(128))}) before it
 * starts, and the container reads it once, when it starts its poller.
 *
 * @param mode the polling mode, or null for {@link PollingMode#resolve the default}
 * (event with a channel, else backoff)
 * @param batchSize most completions taken per poll ({@code ibv_poll_cq num_entries}) and
 * handed to a batch listener at once
 * @param spin adaptive mode: how long to keep spinning after the last completion before
 * waiting on the channel
 * @param ackBatch completion events acknowledged together ({@code ibv_ack_cq_events});
 * all are acked when the poller stops
 * @param maxSleep backoff mode: the longest pause between two polls of an idle queue (the
 * pauses double up to it)
 */
public record PollerSettings(@Nullable PollingMode mode, int batchSize, Duration spin, int ackBatch,
		Duration maxSleep) {

	/**
	 * The defaults: mode by channel, 32 completions per poll, 50 µs spin, events acked by
	 * 64, 1 ms longest backoff sleep (those of the {@code rdma.completion-queues.*}
	 * properties).
	 */
	public static final PollerSettings DEFAULTS = new PollerSettings(null, 32, Duration.ofNanos(50_000), 64,
			Duration.ofMillis(1));

	/**
	 * Checks that the durations are given; sizes are checked when the poller starts.
	 */
	public PollerSettings {
		Objects.requireNonNull(spin, "spin");
		Objects.requireNonNull(maxSleep, "maxSleep");
	}

	/** These settings with {@code mode} (null: by channel). */
	public PollerSettings withMode(@Nullable PollingMode mode) {
		return new PollerSettings(mode, batchSize, spin, ackBatch, maxSleep);
	}

	/** These settings with {@code batchSize}. */
	public PollerSettings withBatchSize(int batchSize) {
		return new PollerSettings(mode, batchSize, spin, ackBatch, maxSleep);
	}

	/** These settings with {@code spin}. */
	public PollerSettings withSpin(Duration spin) {
		return new PollerSettings(mode, batchSize, spin, ackBatch, maxSleep);
	}

	/** These settings with {@code ackBatch}. */
	public PollerSettings withAckBatch(int ackBatch) {
		return new PollerSettings(mode, batchSize, spin, ackBatch, maxSleep);
	}

	/** These settings with {@code maxSleep}. */
	public PollerSettings withMaxSleep(Duration maxSleep) {
		return new PollerSettings(mode, batchSize, spin, ackBatch, maxSleep);
	}

}
