package dev.rdma.benchmarks.starter;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Each thread's context switches of this JVM ({@code /proc/self/task/<tid>/status}:
 * {@code voluntary_ctxt_switches} + {@code nonvoluntary_ctxt_switches}, and its
 * {@code comm} name), read at a phase's boundaries of {@link XstreamBench} beside
 * {@link GuestCpu}: which of the JVM's threads wake, and how often, while a stream runs.
 * Under emulation each wake-up costs host time that an instruction count does not show.
 */
final class ThreadSwitches {

	private ThreadSwitches() {
	}

	/**
	 * Per thread ({@code "tid name"}), its context switches so far; empty when
	 * unreadable.
	 */
	static Map<String, Long> read() {
		Map<String, Long> switches = new HashMap<>();
		try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
			for (Path task : tasks) {
				try {
					String name = Files.readString(task.resolve("comm")).trim();
					long n = 0;
					for (String line : Files.readAllLines(task.resolve("status"))) {
						if (line.startsWith("voluntary_ctxt_switches:")
								|| line.startsWith("nonvoluntary_ctxt_switches:")) {
							n += Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
						}
					}
					switches.put(task.getFileName() + " " + name, n);
				}
				catch (IOException | RuntimeException ex) {
					// the thread ended meanwhile
				}
			}
		}
		catch (IOException ex) {
			// no /proc: nothing to print
		}
		return switches;
	}

	/**
	 * The threads that switched between two readings, most first: {@code name n/s}, and
	 * the JVM's total per second and per message.
	 */
	static String describe(Map<String, Long> before, Map<String, Long> after, double seconds, long messages) {
		if (after.isEmpty()) {
			return "context switches by thread: unknown";
		}
		List<Map.Entry<String, Long>> grew = new ArrayList<>();
		long total = 0;
		for (Map.Entry<String, Long> e : after.entrySet()) {
			long d = e.getValue() - before.getOrDefault(e.getKey(), 0L);
			if (d > 0) {
				grew.add(Map.entry(e.getKey().substring(e.getKey().indexOf(' ') + 1), d));
				total += d;
			}
		}
		grew.sort((a, b) -> Long.compare(b.getValue(), a.getValue()));
		StringBuilder s = new StringBuilder(
				String.format(Locale.ROOT, "context switches of the JVM's threads: %.0f/s, %.3f per message (",
						total / seconds, (double) total / Math.max(1, messages)));
		for (int i = 0; i < grew.size(); i++) {
			s.append(i == 0 ? "" : "; ")
				.append(grew.get(i).getKey())
				.append(String.format(Locale.ROOT, " %.0f/s", grew.get(i).getValue() / seconds));
		}
		return s.append(')').toString();
	}

}
