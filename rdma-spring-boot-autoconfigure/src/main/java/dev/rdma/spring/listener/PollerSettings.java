package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * How the poller of one queue runs: its {@link PollingMode}, the most completions per
 * poll, the adaptive spin and the event ack batch. Mutable until the container starts (a
 * {@code RdmaListenerContainerCustomizer} may change it); the container reads it once,
 * when it starts its thread.
 */
public final class PollerSettings {

	private @Nullable PollingMode mode;

	private int batchSize = 32;

	private Duration spin = Duration.ofNanos(50_000);

	private int ackBatch = 64;

	private Duration maxSleep = Duration.ofMillis(1);

	/**
	 * The polling mode, or null for {@link PollingMode#resolve the default} (event with a
	 * channel, else backoff).
	 */
	public @Nullable PollingMode getMode() {
		return mode;
	}

	public void setMode(@Nullable PollingMode mode) {
		this.mode = mode;
	}

	/**
	 * Most completions taken per poll ({@code ibv_poll_cq num_entries}) and handed to a
	 * batch listener at once.
	 */
	public int getBatchSize() {
		return batchSize;
	}

	public void setBatchSize(int batchSize) {
		this.batchSize = batchSize;
	}

	/**
	 * Adaptive mode: how long to keep spinning after the last completion before waiting
	 * on the channel.
	 */
	public Duration getSpin() {
		return spin;
	}

	public void setSpin(Duration spin) {
		this.spin = Objects.requireNonNull(spin, "spin");
	}

	/**
	 * Backoff mode: the longest pause between two polls of an idle queue (the pauses
	 * double up to it).
	 */
	public Duration getMaxSleep() {
		return maxSleep;
	}

	public void setMaxSleep(Duration maxSleep) {
		this.maxSleep = Objects.requireNonNull(maxSleep, "maxSleep");
	}

	/**
	 * Completion events acknowledged together ({@code ibv_ack_cq_events}); all are acked
	 * when the poller stops.
	 */
	public int getAckBatch() {
		return ackBatch;
	}

	public void setAckBatch(int ackBatch) {
		this.ackBatch = ackBatch;
	}

	/** An independent copy (each container gets its own). */
	public PollerSettings copy() {
		PollerSettings copy = new PollerSettings();
		copy.mode = mode;
		copy.batchSize = batchSize;
		copy.spin = spin;
		copy.ackBatch = ackBatch;
		copy.maxSleep = maxSleep;
		return copy;
	}

	@Override
	public String toString() {
		return "PollerSettings[mode=" + mode + ", batchSize=" + batchSize + ", spin=" + spin + ", ackBatch=" + ackBatch
				+ ", maxSleep=" + maxSleep + "]";
	}

}
