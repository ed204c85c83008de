package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The device tier's launcher (scripts/lib/device-tests.sh) loads only the test classes
 * named {@code *DeviceTest} to read their tags: loading every host test class as well
 * cost minutes under emulation. A class tagged {@code device} or {@code device-admin}
 * under another name would silently not run, so this test fails on one, and on a nested
 * test class in a device test (the name filter sees the enclosing class only through its
 * own name). The tier has no JVM for a tag {@code device-last} any more (the
 * device-removal tests remove a device of their own), so a test tagged so would not run
 * at all: it fails too.
 */
class DeviceTestNamingTests {

	private static final Path ROOT = Path.of("..");

	private static final Pattern DEVICE_TAG = Pattern
		.compile("@Tag\\((DeviceTestSupport\\.TAG|\\w+DeviceTest\\.TAG|\"device(-last|-admin)?\")\\)");

	@Test
	void everyTestTaggedForADeviceIsNamedDeviceTestAndHasNoNestedClass() throws IOException {
		List<Path> sources = new ArrayList<>();
		for (String module : List.of("rdma-bindings", "rdma-spring-boot-autoconfigure", "sample-app")) {
			Path tests = ROOT.resolve(module).resolve("src/test/java");
			if (Files.isDirectory(tests)) {
				try (Stream<Path> files = Files.walk(tests)) {
					files.filter((file) -> file.toString().endsWith(".java")).forEach(sources::add);
				}
			}
		}
		List<String> misnamed = new ArrayList<>();
		List<String> nested = new ArrayList<>();
		List<String> deviceLast = new ArrayList<>();
		int tagged = 0;
		for (Path source : sources) {
			String text = Files.readString(source);
			String name = source.getFileName().toString();
			if (DEVICE_TAG.matcher(text).find()) {
				tagged++;
				if (!name.endsWith("DeviceTest.java")) {
					misnamed.add(ROOT.relativize(source).toString());
				}
			}
			if (text.contains("@Tag(\"device-last\")")) {
				deviceLast.add(ROOT.relativize(source).toString());
			}
			if (name.endsWith("DeviceTest.java") && text.contains("@Nested")) {
				nested.add(ROOT.relativize(source).toString());
			}
		}
		assertThat(tagged).as("test classes tagged for a device").isGreaterThan(30);
		assertThat(misnamed).as("tagged for a device but not named *DeviceTest (the device tier would skip them)")
			.isEmpty();
		assertThat(nested).as("device tests with @Nested classes (the class-name filter would skip them)").isEmpty();
		assertThat(deviceLast).as("tagged device-last, which no device-tier JVM runs").isEmpty();
	}

}
