package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.io.StringWriter;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import org.springframework.boot.context.properties.bind.BindHandler;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.core.env.PropertySource;
import org.springframework.core.io.ByteArrayResource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every snippet of README.md and of the reference in docs/ ({@link #DOCUMENTS}) is one
 * that the test command compiles, binds or runs: the Java snippets are compiled here as
 * the documents show them (imports included), the YAML snippets are bound to
 * {@link RdmaProperties} (no key left unbound) and validated, the XML snippets are the
 * build of the fresh application that {@code scripts/test} builds and runs on the device
 * ({@code scripts/fresh-app}, {@code scripts/lib/fresh-app.sh}), and every shell command
 * is one that the test command runs, or is listed below with where its equivalent runs.
 */
class ReadmeTests {

	private static final Path ROOT = Path.of("..");

	/**
	 * The documents whose snippets are checked: the README and the reference under docs/.
	 */
	static final List<String> DOCUMENTS = List.of("README.md", "docs/configuration.md", "docs/listeners-and-polling.md",
			"docs/connections.md", "docs/running.md", "docs/bindings.md", "docs/troubleshooting.md", "docs/testing.md",
			"docs/benchmarks.md", "docs/deployment.md");

	/**
	 * Notes under docs/ whose blocks are records or instructions for the project's own
	 * tools (the VM, the reliability runs, the benchmark history), not snippets for
	 * users.
	 */
	static final List<String> NOTES = List.of("docs/architecture.md", "docs/reliability.md", "docs/softroce-vm.md",
			"docs/benchmarks-history.md");

	/**
	 * Each README command, and the file and text that show the test command running it
	 * (or what it runs).
	 */
	private static final Map<String, List<String>> COMMANDS = Map.ofEntries(
			// the test command itself (.ci/run runs it)
			Map.entry("scripts/test", List.of(".ci/run", "scripts/test")),
			// the device tier repeated: scripts/test's own loop
			Map.entry("scripts/test --repeat 5", List.of("scripts/test", "--repeat) [[ ${2:-} =~")),
			// its host tier
			Map.entry("./mvnw install", List.of("scripts/test", "\"${MVN[@]}\" install")),
			// scripts/sample builds and runs sample-app.jar; the device tier runs the
			// same jar
			Map.entry("scripts/sample", List.of("scripts/lib/device-tests.sh", "-jar \"$DT_SAMPLE_JAR\"")),
			// the fresh application's build and run (scripts/test: host, then device
			// tier)
			Map.entry("./mvnw package", List.of("scripts/lib/fresh-app.sh", "package -DskipTests")),
			Map.entry("java -jar target/demo-0.0.1-SNAPSHOT.jar", List.of("scripts/lib/fresh-app.sh", "-jar \"$jar\"")),
			// needs a device on the host; what it adds to the sample's JVM is checked
			// here
			Map.entry("./mvnw spring-boot:run -pl sample-app",
					List.of("sample-app/pom.xml", "<jvmArguments>--enable-native-access=ALL-UNNAMED</jvmArguments>")),
			// the sample's two-process mode: the device tier runs both (server on
			// rxeB, client on rxeA)
			Map.entry(
					"java --enable-native-access=ALL-UNNAMED -jar sample-app/target/sample-app.jar --spring.profiles.active=server",
					List.of("scripts/lib/device-tests.sh", "--spring.profiles.active=server")),
			Map.entry(
					"java --enable-native-access=ALL-UNNAMED -jar sample-app/target/sample-app.jar --spring.profiles.active=client",
					List.of("scripts/lib/device-tests.sh", "--spring.profiles.active=client")),
			// documented as not part of the test command
			Map.entry("scripts/bench", List.of("docs/benchmarks.md", "Benchmarks are not part of the test command.")));

	private static String readme() throws IOException {
		return Files.readString(ROOT.resolve("README.md"));
	}

	/** Every checked document, one after the other. */
	private static String documents() throws IOException {
		StringBuilder all = new StringBuilder();
		for (String document : DOCUMENTS) {
			all.append(Files.readString(ROOT.resolve(document))).append('\n');
		}
		return all.toString();
	}

	@Test
	void everyMarkdownFileUnderDocsIsCheckedOrANote() throws IOException {
		List<String> found = new ArrayList<>();
		try (var files = Files.list(ROOT.resolve("docs"))) {
			files.filter(file -> file.toString().endsWith(".md"))
				.forEach(file -> found.add("docs/" + file.getFileName()));
		}
		List<String> known = new ArrayList<>(DOCUMENTS);
		known.addAll(NOTES);
		assertThat(known).as("docs/*.md: add a new document to DOCUMENTS").containsAll(found);
	}

	private static List<String> blocks(String readme, String language) {
		Matcher block = Pattern.compile("^```" + language + "\\n(.*?)^```$", Pattern.DOTALL | Pattern.MULTILINE)
			.matcher(readme);
		List<String> blocks = new ArrayList<>();
		while (block.find()) {
			blocks.add(block.group(1));
		}
		return blocks;
	}

	@Test
	void everyJavaSnippetCompilesAsWritten(@TempDir Path out) throws IOException {
		List<String> snippets = blocks(documents(), "java");
		assertThat(snippets).hasSizeGreaterThanOrEqualTo(4);
		JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
		for (String snippet : snippets) {
			assertThat(snippet).as("a Java snippet without imports:%n%s", snippet)
				.containsPattern("(?m)^import [\\w.]+;$");
			Matcher type = Pattern.compile("(?m)^(?:public )?(?:final )?(?:class|record|interface) (\\w+)")
				.matcher(snippet);
			assertThat(type.find()).as("a Java snippet that declares no class:%n%s", snippet).isTrue();
			JavaFileObject source = new SimpleJavaFileObject(URI.create("string:///" + type.group(1) + ".java"),
					JavaFileObject.Kind.SOURCE) {
				@Override
				public CharSequence getCharContent(boolean ignoreEncodingErrors) {
					return snippet;
				}
			};
			StringWriter diagnostics = new StringWriter();
			boolean compiled = javac
				.getTask(diagnostics, null, null,
						List.of("-proc:none", "-Xlint:all,-restricted", "-Werror", "-classpath",
								System.getProperty("java.class.path"), "-d", out.toString()),
						null, List.of(source))
				.call();
			assertThat(compiled).as("snippet %s:%n%s%n%s", type.group(1), snippet, diagnostics).isTrue();
		}
	}

	@Test
	void everyYamlSnippetBindsEveryKeyAndValidates() throws IOException {
		List<String> snippets = blocks(documents(), "yaml");
		assertThat(snippets).hasSizeGreaterThanOrEqualTo(2);
		for (String snippet : snippets) {
			List<PropertySource<?>> sources = new YamlPropertySourceLoader().load("README.md or docs/",
					new ByteArrayResource(snippet.getBytes(StandardCharsets.UTF_8)));
			Binder binder = new Binder(ConfigurationPropertySources.from(sources));
			RdmaProperties properties = binder
				.bind(RdmaProperties.PREFIX, Bindable.of(RdmaProperties.class),
						new NoUnboundElementsBindHandler(BindHandler.DEFAULT))
				.get();
			assertThat(properties.getCompletionQueues()).as(snippet).isNotEmpty();
			RdmaPropertiesValidator.validate(properties, name -> false);
		}
	}

	@Test
	void everyXmlSnippetIsInTheFreshApplicationsBuild() throws IOException {
		String pom = normalized(Files.readString(ROOT.resolve("scripts/fresh-app/pom.xml")));
		List<String> snippets = blocks(documents(), "xml");
		assertThat(snippets).hasSizeGreaterThanOrEqualTo(2);
		assertThat(snippets).allSatisfy(snippet -> assertThat(pom).contains(normalized(snippet)));
	}

	@Test
	void theFreshApplicationIsBuiltFromTheReadmesBlocks() throws IOException {
		String readme = readme();
		assertThat(readme).contains("<!-- fresh-app: src/main/resources/application.yml -->\n```yaml\n",
				"<!-- fresh-app: src/main/resources/application.properties -->\n```properties\n",
				"<!-- fresh-app: src/main/java/com/example/demo/RxListener.java -->\n```java\n");
		// the actuator settings the device tier reads over HTTP come from the README too
		assertThat(Files.exists(ROOT.resolve("scripts/fresh-app/src/main/resources/application.properties")))
			.as("a properties file of the fresh application that the README does not show")
			.isFalse();
		assertThat(Files.readString(ROOT.resolve("scripts/test"))).contains("scripts/lib/fresh-app.sh");
	}

	@Test
	void everyCommandIsRunByTheTestCommand() throws IOException {
		String readme = documents();
		List<String> commands = new ArrayList<>();
		for (String block : blocks(readme, "bash")) {
			block.lines()
				.map(line -> line.replaceFirst("\\s+#.*$", "").strip())
				.filter(line -> !line.isEmpty() && !line.startsWith("#"))
				.forEach(commands::add);
		}
		assertThat(commands).isNotEmpty();
		assertThat(COMMANDS).containsKeys(commands.toArray(String[]::new));
		for (String command : commands) {
			List<String> where = COMMANDS.get(command);
			assertThat(Files.readString(ROOT.resolve(where.get(0)))).as(command).contains(where.get(1));
		}
		assertThat(readme).doesNotContain("dev.rdma.spring.boot.autoconfigure.listener");
	}

	private static String normalized(String xml) {
		return xml.replaceAll("\\s+", " ").replace("> <", "><").strip();
	}

	/** The "Running with and without RDMA" snippet of docs/running.md. */
	@org.springframework.stereotype.Component
	static class Transport {

		private final dev.rdma.verbs.Context nic0; // null without RDMA

		Transport(org.springframework.beans.factory.ObjectProvider<dev.rdma.verbs.Context> nic0, RdmaStatus status) {
			this.nic0 = nic0.getIfAvailable();
			if (this.nic0 == null) {
				System.out.println("RDMA off, using TCP: " + status.reason());
			}
		}

	}

}
