package dev.rdma.spring.listener;

import org.jspecify.annotations.Nullable;

/** How the poller of a completion queue waits for completions. */
public enum PollingMode {

	/**
	 * Spin on the CQ ({@code Thread.onSpinWait}); one CPU busy, lowest latency. No
	 * channel needed.
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
	ADAPTIVE;

	/**
	 * The mode a poller uses: {@code configured}, or, when that is null, {@link #EVENT}
	 * for a queue with a completion channel and {@link #BUSY} for one without.
	 */
	public static PollingMode resolve(@Nullable PollingMode configured, boolean hasChannel) {
		if (configured != null) {
			return configured;
		}
		return hasChannel ? EVENT : BUSY;
	}

}
