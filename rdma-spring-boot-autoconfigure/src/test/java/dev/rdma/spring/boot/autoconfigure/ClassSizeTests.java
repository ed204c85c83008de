package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A main class over {@value #LIMIT} lines is doing two jobs: it is split by
 * responsibility, or it is listed with its reason in docs/architecture.md, section
 * "Classes over 500 lines" (one line per class: {@code - `fully.qualified.Name` —
 * reason}). A listed class that shrank below the limit is dropped from the list, so the
 * list stays true.
 */
class ClassSizeTests {

	static final int LIMIT = 500;

	private static final Path ROOT = Path.of("..");

	private static final List<String> MODULES = List.of("rdma-bindings", "rdma-spring-boot-autoconfigure",
			"rdma-spring-boot-starter", "sample-app", "benchmarks");

	private static final String SECTION = "## Classes over 500 lines";

	private static final Pattern ENTRY = Pattern.compile("^- `([\\w.]+)` — (\\S.*)$");

	@Test
	void everyMainClassOverTheLimitIsListedWithItsReasonAndNoListedClassIsUnderIt() throws IOException {
		Map<String, Long> sizes = mainClassSizes();
		assertThat(sizes).as("main classes found").hasSizeGreaterThan(100);
		Map<String, String> listed = listedClasses();
		List<String> unlisted = new ArrayList<>();
		sizes.forEach((name, lines) -> {
			if (lines > LIMIT && !listed.containsKey(name)) {
				unlisted.add(name + " (" + lines + " lines)");
			}
		});
		List<String> stale = new ArrayList<>();
		listed.keySet().forEach((name) -> {
			Long lines = sizes.get(name);
			if (lines == null || lines <= LIMIT) {
				stale.add(name + " (" + ((lines != null) ? lines + " lines" : "no such class") + ")");
			}
		});
		assertThat(unlisted)
			.as("main classes over %d lines: split them by responsibility, or list each in docs/architecture.md "
					+ "under \"%s\" as \"- `name` — reason\"", LIMIT, SECTION)
			.isEmpty();
		assertThat(stale).as("listed under \"%s\" in docs/architecture.md but not over %d lines", SECTION, LIMIT)
			.isEmpty();
	}

	private static Map<String, Long> mainClassSizes() throws IOException {
		Map<String, Long> sizes = new TreeMap<>();
		for (String module : MODULES) {
			Path main = ROOT.resolve(module).resolve("src/main/java");
			if (!Files.isDirectory(main)) {
				continue;
			}
			try (Stream<Path> files = Files.walk(main)) {
				for (Path file : files.filter((f) -> f.toString().endsWith(".java")).toList()) {
					String name = main.relativize(file).toString().replace('/', '.').replaceAll("\\.java$", "");
					try (Stream<String> lines = Files.lines(file)) {
						sizes.put(name, lines.count());
					}
				}
			}
		}
		return sizes;
	}

	private static Map<String, String> listedClasses() throws IOException {
		List<String> lines = Files.readAllLines(ROOT.resolve("docs/architecture.md"));
		int start = lines.indexOf(SECTION);
		assertThat(start).as("docs/architecture.md has a section \"%s\"", SECTION).isNotNegative();
		Map<String, String> listed = new TreeMap<>();
		for (int i = start + 1; i < lines.size() && !lines.get(i).startsWith("#"); i++) {
			Matcher entry = ENTRY.matcher(lines.get(i));
			if (entry.matches()) {
				listed.put(entry.group(1), entry.group(2));
			}
		}
		return listed;
	}

}
