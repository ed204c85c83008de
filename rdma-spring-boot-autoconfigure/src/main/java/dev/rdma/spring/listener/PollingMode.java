package dev.rdma.spring.listener;

import org.jspecify.annotations.Nullable;

/** How the poller of a completion queue waits for completions. */
public enum PollingMode {

	/**
	 * Spin on the CQ ({@code Thread.onSpinWait}); one CPU busy all the time, also when
	 * idle: lowest latency. No channel needed. Never a default: it must be asked for.
	 */
	BUSY,

	/**
	 * Arm, drain, wait on the completion channel, get the event, re-arm, drain. Needs a
	 * channel.
	 */
	EVENT,

	/**
	 * Busy for {@code spin} after the last completion, then event mode. Needs a channel.
	 */
	ADAPTIVE,

	/**
	 * Busy for {@code spin} after the last completion, then sleeps between polls, each
	 * pause twice the last, up to {@code max-sleep}: an idle poller costs next to no CPU,
	 * a completion waits at most about {@code max-sleep}. No channel needed: the default
	 * for a queue without one.
	 */
	BACKOFF;

	/**
	 * The mode a poller uses: {@code configured}, or, when that is null, {@link #EVENT}
	 * for a queue with a completion channel and {@link #BACKOFF} for one without. Never
	 * {@link #BUSY} unless configured: a default must not burn a core.
	 */
	public static PollingMode resolve(@Nullable PollingMode configured, boolean hasChannel) {
		if (configured != null) {
			return configured;
		}
		return hasChannel ? EVENT : BACKOFF;
	}

	/** Whether the mode waits on a completion channel (and needs one). */
	public boolean needsChannel() {
		return this == EVENT || this == ADAPTIVE;
	}

}
