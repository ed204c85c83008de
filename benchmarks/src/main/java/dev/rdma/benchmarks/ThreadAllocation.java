package dev.rdma.benchmarks;

import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The heap bytes some threads of this JVM allocated
 * ({@code com.sun.management.ThreadMXBean#getThreadAllocatedBytes}), read at a measured
 * window's boundaries: the threads are chosen once, before the window, and
 * {@link #allocated()} allocates nothing itself, so it can be read inside the window.
 * {@code XstreamBench} counts the data path's threads (the starter's pollers and the
 * application's streaming threads) per message, and the starter's control threads
 * (accept, connect, async events), whose idle loops wake on a timer whatever the rate,
 * per second.
 */
public final class ThreadAllocation {

	private static final com.sun.management.ThreadMXBean THREADS = (com.sun.management.ThreadMXBean) ManagementFactory
		.getThreadMXBean();

	private final long[] ids;

	private ThreadAllocation(long[] ids) {
		this.ids = ids;
	}

	/** The live threads that {@code which} selects, by id. */
	public static ThreadAllocation of(Predicate<Thread> which) {
		return new ThreadAllocation(Thread.getAllStackTraces()
			.keySet()
			.stream()
			.filter(which)
			.mapToLong(Thread::threadId)
			.sorted()
			.toArray());
	}

	/**
	 * The bytes these threads allocated so far (ended ones count 0); allocates nothing.
	 */
	public long allocated() {
		long sum = 0;
		for (long id : ids) {
			long b = THREADS.getThreadAllocatedBytes(id);
			if (b > 0) {
				sum += b;
			}
		}
		return sum;
	}

	/** Per thread, in the order of {@link #describe}. */
	public long[] perThread() {
		long[] b = new long[ids.length];
		for (int i = 0; i < ids.length; i++) {
			b[i] = THREADS.getThreadAllocatedBytes(ids[i]);
		}
		return b;
	}

	/**
	 * {@code name bytes; ...}: what each thread allocated between two
	 * {@link #perThread()} readings, divided by {@code per} (1, or the seconds between
	 * them).
	 */
	public String describe(long[] before, long[] after, double per) {
		Map<Long, String> names = new HashMap<>();
		for (Thread t : Thread.getAllStackTraces().keySet()) {
			names.put(t.threadId(), t.getName());
		}
		StringBuilder sb = new StringBuilder();
		for (int i = 0; i < ids.length; i++) {
			sb.append(names.getOrDefault(ids[i], "#" + ids[i]))
				.append(' ')
				.append(Math.round((after[i] - before[i]) / per))
				.append("; ");
		}
		return sb.toString();
	}

}
