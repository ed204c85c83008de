package dev.rdma.benchmarks;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The CPU time of every thread of this process, from {@code /proc/self/task/<tid>/stat}
 * (the JVM's own threads included: compilers, GC, VM thread), to see where the time of a
 * measured window went. Clock ticks of 1/100 s: coarse, meant for windows of seconds.
 */
public final class ThreadCpu {

	private ThreadCpu() {
	}

	/** By task id: {name, user ticks, system ticks}. */
	public static Map<String, String[]> snapshot() {
		Map<String, String[]> m = new HashMap<>();
		File[] tasks = new File("/proc/self/task").listFiles();
		for (File task : tasks == null ? new File[0] : tasks) {
			try {
				String stat = Files.readString(task.toPath().resolve("stat"));
				int open = stat.indexOf('(');
				int close = stat.lastIndexOf(')');
				String[] f = stat.substring(close + 2).split(" ");
				// after the name: state is field 3, utime field 14, stime field 15
				m.put(task.getName(), new String[] { stat.substring(open + 1, close), f[11], f[12] });
			}
			catch (IOException | RuntimeException ex) {
				// the thread ended meanwhile
			}
		}
		return m;
	}

	/**
	 * Prints, after {@code prefix}, the twelve threads that used the most CPU between the
	 * two snapshots, per round trip (user+system microseconds).
	 */
	public static void printTop(String prefix, Map<String, String[]> before, Map<String, String[]> after,
			double rounds) {
		double tick = 1e6 / 100; // us per clock tick (USER_HZ = 100)
		StringBuilder sb = new StringBuilder(prefix);
		after.entrySet().stream().filter(e -> before.containsKey(e.getKey())).map(e -> {
			String[] b = before.get(e.getKey());
			String[] a = e.getValue();
			long user = Long.parseLong(a[1]) - Long.parseLong(b[1]);
			long sys = Long.parseLong(a[2]) - Long.parseLong(b[2]);
			return new Object[] { a[0], user, sys };
		})
			.filter(o -> (long) o[1] + (long) o[2] > 0)
			.sorted((x, y) -> Long.compare((long) y[1] + (long) y[2], (long) x[1] + (long) x[2]))
			.limit(12)
			.forEach(o -> sb.append(String.format(Locale.ROOT, " %s %.0f+%.0f us;", o[0], (long) o[1] * tick / rounds,
					(long) o[2] * tick / rounds)));
		System.out.println(sb);
	}

}
