package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

import dev.rdma.spring.listener.PollingMode;

/** Polling of a completion queue by its listener's poller thread. */
@ConfigurationPropertiesSource
public class Polling {

	/**
	 * Polling mode: busy (spins, one core per queue), event or adaptive (need a channel),
	 * backoff (sleeps when idle). Omitted = event when the queue has a channel, else
	 * backoff; busy only when set.
	 */
	private @Nullable PollingMode mode;

	/**
	 * Most completions taken per poll (ibv_poll_cq num_entries) and handed to a batch
	 * listener at once.
	 */
	private int batchSize = 32;

	/**
	 * Adaptive mode: how long to keep spinning after the last completion before waiting
	 * on the channel.
	 */
	private Duration spin = Duration.ofNanos(50_000);

	/**
	 * Backoff mode: the longest pause between two polls of an idle queue; the pauses
	 * double up to it, so an idle poller costs next to no CPU and a completion waits at
	 * most about this long.
	 */
	private Duration maxSleep = Duration.ofMillis(1);

	public @Nullable PollingMode getMode() {
		return mode;
	}

	public void setMode(@Nullable PollingMode mode) {
		this.mode = mode;
	}

	public int getBatchSize() {
		return batchSize;
	}

	public void setBatchSize(int batchSize) {
		this.batchSize = batchSize;
	}

	public Duration getSpin() {
		return spin;
	}

	public void setSpin(Duration spin) {
		this.spin = spin;
	}

	public Duration getMaxSleep() {
		return maxSleep;
	}

	public void setMaxSleep(Duration maxSleep) {
		this.maxSleep = maxSleep;
	}

}
