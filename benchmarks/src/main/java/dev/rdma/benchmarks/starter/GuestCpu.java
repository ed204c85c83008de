package dev.rdma.benchmarks.starter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The whole machine's CPU time by kind, of all CPUs and of each ({@code /proc/stat}'s
 * {@code cpu} lines: user, nice, system, idle, iowait, irq, softirq, steal, in clock
 * ticks), read at a phase's boundaries of {@link XstreamBench} (outside the measured
 * allocation). Under Soft-RoCE the device is the kernel: its work shows as system and
 * softirq time of whichever CPU runs it, not as the JVM's CPU, and a CPU with nothing to
 * do is idle. A stream that leaves the machine idle while messages are outstanding waits
 * for something other than work. With them, the machine's context switches and interrupts
 * ({@code ctxt}, {@code intr}: timers, inter-processor interrupts and devices alike) per
 * message: under emulation each wake-up costs host time that an instruction count does
 * not show. {@code xstream-perftest.sh} prints the same figures for perftest's measured
 * part.
 */
final class GuestCpu {

	private static final String[] KINDS = { "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal" };

	/** Context switches and interrupts, after the ticks. */
	private static final int EVENTS = 2;

	private GuestCpu() {
	}

	/**
	 * The ticks of each kind of {@link #KINDS}, of all CPUs and then of each
	 * ({@code cpu0}, {@code cpu1}, ...): {@link #KINDS}{@code .length} values per line;
	 * then the context switches and the interrupts since boot ({@link #EVENTS} values);
	 * all -1 when they cannot be read.
	 */
	static long[] read() {
		try {
			List<String> all = Files.readAllLines(Path.of("/proc/stat"));
			List<String> lines = all.stream().filter((l) -> l.startsWith("cpu")).toList();
			long[] ticks = new long[lines.size() * KINDS.length + EVENTS];
			for (int l = 0; l < lines.size(); l++) {
				String[] fields = lines.get(l).trim().split("\\s+");
				for (int i = 0; i < KINDS.length; i++) {
					ticks[l * KINDS.length + i] = Long.parseLong(fields[i + 1]);
				}
			}
			for (String l : all) {
				// "ctxt N", "intr N n0 n1 ...": the first number is the total
				int at = l.startsWith("ctxt ") ? 0 : l.startsWith("intr ") ? 1 : -1;
				if (at >= 0) {
					ticks[ticks.length - EVENTS + at] = Long.parseLong(l.split(" ", 3)[1]);
				}
			}
			return ticks;
		}
		catch (IOException | RuntimeException ex) {
			long[] unknown = new long[KINDS.length];
			Arrays.fill(unknown, -1);
			return unknown;
		}
	}

	/**
	 * The share of each kind between two readings, in percent of all CPUs' time, and the
	 * busy time (all but idle and iowait) per message, e.g.
	 * {@code guest cpu: busy 97.1 % (user 30.2, system 40.3, irq 0.0, softirq 26.6; cpu0 99.0, cpu1 95.2), idle 2.9 %,
	 * 201 us busy per message, 0.052 context switches and 0.061 interrupts per message}:
	 * a CPU near 100 % busy is the bottleneck.
	 */
	static String describe(long[] before, long[] after, long messages) {
		if (before[0] < 0 || after[0] < 0) {
			return "guest cpu: unknown";
		}
		long[] delta = new long[KINDS.length];
		for (int i = 0; i < delta.length; i++) {
			delta[i] = after[i] - before[i];
		}
		long total = all(before, after, 0);
		if (total <= 0) {
			return "guest cpu: no ticks";
		}
		long idle = idle(before, after, 0);
		// USER_HZ is 100 on Debian's kernels: a tick is 10 ms of one CPU
		double busyMicros = (total - idle) * 10_000.0;
		StringBuilder perCpu = new StringBuilder();
		int lines = (Math.min(before.length, after.length) - EVENTS) / KINDS.length;
		for (int c = 1; c < lines; c++) {
			long ofCpu = all(before, after, c);
			perCpu.append(perCpu.isEmpty() ? "" : ", ")
				.append(String.format(Locale.ROOT, "cpu%d %.1f", c - 1,
						ofCpu > 0 ? 100.0 * (ofCpu - idle(before, after, c)) / ofCpu : 0));
		}
		return String.format(Locale.ROOT,
				"guest cpu: busy %.1f %% (user %.1f, system %.1f, irq %.1f, softirq %.1f; %s), idle %.1f %%, "
						+ "%.0f us busy per message, %.3f context switches and %.3f interrupts per message",
				100.0 * (total - idle) / total, 100.0 * (delta[0] + delta[1]) / total, 100.0 * delta[2] / total,
				100.0 * delta[5] / total, 100.0 * delta[6] / total, perCpu, 100.0 * idle / total,
				busyMicros / Math.max(1, messages), perMessage(before, after, 0, messages),
				perMessage(before, after, 1, messages));
	}

	/** Event {@code at} (0: context switches, 1: interrupts) per message. */
	private static double perMessage(long[] before, long[] after, int at, long messages) {
		return (double) (after[after.length - EVENTS + at] - before[before.length - EVENTS + at])
				/ Math.max(1, messages);
	}

	/** The ticks of every kind that line {@code line} (0: all CPUs) grew by. */
	private static long all(long[] before, long[] after, int line) {
		long sum = 0;
		for (int i = 0; i < KINDS.length; i++) {
			sum += after[line * KINDS.length + i] - before[line * KINDS.length + i];
		}
		return sum;
	}

	/** The idle and iowait ticks that line {@code line} grew by. */
	private static long idle(long[] before, long[] after, int line) {
		int at = line * KINDS.length;
		return after[at + 3] - before[at + 3] + after[at + 4] - before[at + 4];
	}

}