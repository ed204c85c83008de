package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every relative link of README.md, CHANGELOG.md and docs/*.md points at a file of the
 * repository, and a link with an anchor ({@code file.md#section}, {@code #section}) at a
 * heading of that Markdown file (GitHub's anchors: lower case, punctuation dropped,
 * spaces as hyphens).
 */
class DocsLinksTests {

	private static final Path ROOT = Path.of("..");

	private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");

	@Test
	void everyRelativeLinkPointsAtAnExistingFileAndHeading() throws IOException {
		List<Path> documents = new ArrayList<>(List.of(ROOT.resolve("README.md"), ROOT.resolve("CHANGELOG.md")));
		try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
			docs.filter(file -> file.toString().endsWith(".md")).sorted().forEach(documents::add);
		}
		List<String> broken = new ArrayList<>();
		int checked = 0;
		for (Path document : documents) {
			Matcher link = LINK.matcher(withoutCode(Files.readString(document)));
			while (link.find()) {
				String target = link.group(1);
				if (target.matches("^[a-z]+:.*")) {
					continue;
				}
				checked++;
				int hash = target.indexOf('#');
				String file = (hash < 0) ? target : target.substring(0, hash);
				Path resolved = file.isEmpty() ? document : document.getParent().resolve(file).normalize();
				if (!Files.exists(resolved)) {
					broken.add(ROOT.relativize(document) + ": " + target + " (no such file)");
				}
				else if (hash >= 0 && resolved.toString().endsWith(".md")
						&& !anchors(resolved).contains(target.substring(hash + 1))) {
					broken.add(ROOT.relativize(document) + ": " + target + " (no such heading)");
				}
			}
		}
		assertThat(checked).isGreaterThan(30);
		assertThat(broken).as("broken links").isEmpty();
	}

	/** The anchors GitHub gives the headings of a Markdown file. */
	static Set<String> anchors(Path markdown) throws IOException {
		Set<String> anchors = new LinkedHashSet<>();
		for (String line : withoutCode(Files.readString(markdown)).lines().toList()) {
			if (line.matches("^#{1,6} .*")) {
				anchors.add(line.replaceFirst("^#+ ", "")
					.strip()
					.toLowerCase(Locale.ROOT)
					.replaceAll("[^\\p{L}\\p{N} _-]", "")
					.replace(' ', '-'));
			}
		}
		return anchors;
	}

	/**
	 * The text without fenced code blocks, whose lines are neither links nor headings.
	 */
	private static String withoutCode(String markdown) {
		return markdown.replaceAll("(?ms)^```.*?^```$", "");
	}

}
