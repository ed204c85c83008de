package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.BitSet;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * How the threads of a {@link PollerGroup} run: how many there are, their
 * {@link PollingMode} (for every queue of the group), the adaptive spin, and the batch
 * budget: the most completions one queue gets per turn before the thread moves on to the
 * next ready queue, so that one flooded queue cannot starve the others. An immutable
 * value, built once (by the starter from {@code rdma.pollers.<group>}) and read when the
 * group is created.
 *
 * @param threads threads of the group (at least 1); each owns the queues assigned to it
 * for life
 * @param mode the polling mode of every queue of the group: event (one epoll_wait for all
 * the thread's channels), busy (spin over all the thread's queues) or adaptive
 * @param spin adaptive mode: how long a thread keeps spinning over its queues after the
 * last completion before it arms them all and waits
 * @param batchBudget the most completions taken from one queue per turn (rounded up to
 * whole polls of its batch size); what is left waits for the queue's next turn
 * @param cpus the CPUs each thread of the group is pinned to when it starts
 * ({@code sched_setaffinity}), as a Linux CPU list such as {@code 0-3,6}; null: not
 * pinned
 */
public record PollerGroupSettings(int threads, PollingMode mode, Duration spin, int batchBudget,
		@Nullable String cpus) {

	/**
	 * The defaults: 1 thread, event mode, 50 µs spin, a budget of 256 completions (those
	 * of the {@code rdma.pollers.*} properties, and of the group {@code default} when it
	 * is not configured).
	 */
	public static final PollerGroupSettings DEFAULTS = new PollerGroupSettings(1, PollingMode.EVENT,
			Duration.ofNanos(50_000), 256);

	/** Checks that the mode and the spin are given. */
	public PollerGroupSettings {
		Objects.requireNonNull(mode, "mode");
		Objects.requireNonNull(spin, "spin");
	}

	/** Settings whose threads are not pinned. */
	public PollerGroupSettings(int threads, PollingMode mode, Duration spin, int batchBudget) {
		this(threads, mode, spin, batchBudget, null);
	}

	/** These settings with {@code cpus} (a Linux CPU list, null: not pinned). */
	public PollerGroupSettings withCpus(@Nullable String cpus) {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

	/** The CPUs of {@link #cpus()}, null when not pinned. */
	public @Nullable BitSet cpuSet() {
		return cpus == null ? null : dev.rdma.verbs.CpuAffinity.parse(cpus);
	}

	/** These settings with {@code threads}. */
	public PollerGroupSettings withThreads(int threads) {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

	/** These settings with {@code mode}. */
	public PollerGroupSettings withMode(PollingMode mode) {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

	/** These settings with {@code spin}. */
	public PollerGroupSettings withSpin(Duration spin) {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

	/** These settings with {@code batchBudget}. */
	public PollerGroupSettings withBatchBudget(int batchBudget) {
		return new PollerGroupSettings(threads, mode, spin, batchBudget, cpus);
	}

}
