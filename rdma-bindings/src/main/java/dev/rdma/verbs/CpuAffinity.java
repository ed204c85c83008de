package dev.rdma.verbs;

import java.util.BitSet;

import dev.rdma.verbs.ffm.Sched;

/**
 * CPU lists in Linux's notation ({@code 0-3,6}, as in
 * {@code /sys/devices/system/node/node0/cpulist} and {@code taskset -c}) and the pinning
 * of the calling thread to one ({@code sched_setaffinity(2)}, pid 0). Stateless and
 * thread-safe; each call acts on the thread that makes it.
 */
public final class CpuAffinity {

	/** The largest CPU number a list may name: glibc's CPU_SETSIZE - 1. */
	public static final int MAX_CPU = Sched.CPU_SET_BYTES * 8 - 1;

	private CpuAffinity() {
	}

	/**
	 * Parses a CPU list such as {@code 0-3,6}: comma-separated CPU numbers and ranges
	 * {@code a-b} with {@code a <= b}, each at most {@link #MAX_CPU}; blanks around the
	 * items are ignored.
	 * @throws IllegalArgumentException naming the bad item when the list is empty or an
	 * item is not a number, a range or is out of bounds
	 */
	public static BitSet parse(String list) {
		BitSet cpus = new BitSet();
		if (list.isBlank()) {
			throw new IllegalArgumentException("an empty CPU list");
		}
		for (String raw : list.split(",", -1)) {
			String item = raw.trim();
			int dash = item.indexOf('-');
			int from = cpu(dash < 0 ? item : item.substring(0, dash), item);
			int to = dash < 0 ? from : cpu(item.substring(dash + 1), item);
			if (to < from) {
				throw new IllegalArgumentException("'" + item + "' is a range from high to low");
			}
			cpus.set(from, to + 1);
		}
		return cpus;
	}

	private static int cpu(String text, String item) {
		String t = text.trim();
		if (t.isEmpty() || !t.chars().allMatch(Character::isDigit) || t.length() > 4) {
			throw new IllegalArgumentException("'" + item + "' is not a CPU number or a range a-b");
		}
		int cpu = Integer.parseInt(t);
		if (cpu > MAX_CPU) {
			throw new IllegalArgumentException("CPU " + cpu + " is beyond CPU_SETSIZE (at most " + MAX_CPU + ")");
		}
		return cpu;
	}

	/** Formats CPUs as a list such as {@code 0-3,6}. */
	public static String format(BitSet cpus) {
		StringBuilder s = new StringBuilder();
		for (int from = cpus.nextSetBit(0); from >= 0; from = cpus.nextSetBit(from)) {
			int to = cpus.nextClearBit(from) - 1;
			if (!s.isEmpty()) {
				s.append(',');
			}
			s.append(from);
			if (to > from) {
				s.append('-').append(to);
			}
			from = to + 1;
		}
		return s.toString();
	}

	/**
	 * Pins the calling thread to {@code cpus} ({@code sched_setaffinity(0, ...)}).
	 * @throws VerbsException with the errno (EINVAL: none of the CPUs is online or
	 * allowed to this process)
	 */
	public static void pinCurrentThread(BitSet cpus) {
		int errno = Sched.setAffinity(cpus);
		if (errno != 0) {
			throw new VerbsException("sched_setaffinity", errno,
					"CPUs " + format(cpus) + " for thread " + Thread.currentThread().getName());
		}
	}

	/** The CPUs the calling thread may run on ({@code sched_getaffinity(0, ...)}). */
	public static BitSet currentThread() {
		return Sched.getAffinity();
	}

}
