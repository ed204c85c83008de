package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollingMode;

/** A poller group: threads shared by the listeners of many completion queues. */
@ConfigurationPropertiesSource
public class PollerProperties {

	/**
	 * Threads of the group; each owns the queues assigned to it (balanced, by completion
	 * vector where the device has several) until they stop.
	 */
	private int threads = 1;

	/**
	 * Polling mode of every queue of the group: event (one epoll_wait for all of a
	 * thread's channels), busy (spin over all of a thread's queues) or adaptive (backoff
	 * is a dedicated poller's mode).
	 */
	private PollingMode mode = PollingMode.EVENT;

	/**
	 * Adaptive mode: how long a thread keeps spinning over its queues after the last
	 * completion before it arms them and waits.
	 */
	private Duration spin = Duration.ofNanos(50_000);

	/**
	 * Most completions taken from one queue per turn (rounded up to whole polls of its
	 * batch-size), so that one flooded queue cannot starve the others.
	 */
	private int batchBudget = 256;

	/**
	 * CPUs each thread of the group is pinned to (sched_setaffinity), a Linux CPU list
	 * such as 0-3,6, best those of the device's NUMA node (local_cpulist, shown in the
	 * startup report); omitted = not pinned.
	 */
	private @Nullable String cpus;

	public int getThreads() {
		return threads;
	}

	public void setThreads(int threads) {
		this.threads = threads;
	}

	public PollingMode getMode() {
		return mode;
	}

	public void setMode(PollingMode mode) {
		this.mode = mode;
	}

	public Duration getSpin() {
		return spin;
	}

	public void setSpin(Duration spin) {
		this.spin = spin;
	}

	public int getBatchBudget() {
		return batchBudget;
	}

	public void setBatchBudget(int batchBudget) {
		this.batchBudget = batchBudget;
	}

	public @Nullable String getCpus() {
		return cpus;
	}

	public void setCpus(@Nullable String cpus) {
		this.cpus = cpus;
	}

	/** The settings the group's threads run with, built once from these properties. */
	public PollerGroupSettings toSettings() {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

}
