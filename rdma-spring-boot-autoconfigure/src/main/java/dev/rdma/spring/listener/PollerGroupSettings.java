package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.Objects;

/**
 * How the threads of a {@link PollerGroup} run: how many there are, their
 * {@link PollingMode} (for every queue of the group), the adaptive spin, and the batch
 * budget: the most completions one queue gets per turn before the thread moves on to the
 * next ready queue, so that one flooded queue cannot starve the others. Read once, when
 * the group is created.
 */
public final class PollerGroupSettings {

	private int threads = 1;

	private PollingMode mode = PollingMode.EVENT;

	private Duration spin = Duration.ofNanos(50_000);

	private int batchBudget = 256;

	/**
	 * Threads of the group (at least 1); each owns the queues assigned to it for life.
	 */
	public int getThreads() {
		return threads;
	}

	public void setThreads(int threads) {
		this.threads = threads;
	}

	/**
	 * The polling mode of every queue of the group: event (one epoll_wait for all the
	 * thread's channels), busy (spin over all the thread's queues) or adaptive.
	 */
	public PollingMode getMode() {
		return mode;
	}

	public void setMode(PollingMode mode) {
		this.mode = Objects.requireNonNull(mode, "mode");
	}

	/**
	 * Adaptive mode: how long a thread keeps spinning over its queues after the last
	 * completion before it arms them all and waits.
	 */
	public Duration getSpin() {
		return spin;
	}

	public void setSpin(Duration spin) {
		this.spin = Objects.requireNonNull(spin, "spin");
	}

	/**
	 * The most completions taken from one queue per turn (rounded up to whole polls of
	 * its batch size); what is left waits for the queue's next turn.
	 */
	public int getBatchBudget() {
		return batchBudget;
	}

	public void setBatchBudget(int batchBudget) {
		this.batchBudget = batchBudget;
	}

	/** An independent copy. */
	public PollerGroupSettings copy() {
		PollerGroupSettings copy = new PollerGroupSettings();
		copy.threads = threads;
		copy.mode = mode;
		copy.spin = spin;
		copy.batchBudget = batchBudget;
		return copy;
	}

	@Override
	public String toString() {
		return "PollerGroupSettings[threads=" + threads + ", mode=" + mode + ", spin=" + spin + ", batchBudget="
				+ batchBudget + "]";
	}

}
