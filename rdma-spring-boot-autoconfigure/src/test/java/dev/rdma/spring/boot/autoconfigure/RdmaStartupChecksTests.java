package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.support.SpringFactoriesLoader;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatNoException;

/**
 * The checks made before any bean exists: the Spring Boot version (Boot 3.x fails with a
 * message naming the required version) and native access (one WARN line saying what to
 * add), the latter in a child JVM started without {@code --enable-native-access}.
 */
class RdmaStartupChecksTests {

	private static final String ADVICE = "Native access is not enabled for the RDMA bindings";

	@Test
	void springBoot3FailsNamingTheRequiredVersion() {
		assertThatIllegalStateException().isThrownBy(() -> RdmaStartupChecks.checkBootVersion("3.5.16"))
			.withMessageContaining("needs Spring Boot 4.0.x and 4.1.x")
			.withMessageContaining("runs Spring Boot 3.5.16");
		assertThatIllegalStateException().isThrownBy(() -> RdmaStartupChecks.checkBootVersion("3"))
			.withMessageContaining("needs Spring Boot 4.0.x and 4.1.x");
	}

	@Test
	void springBoot4Passes() {
		assertThatNoException().isThrownBy(() -> RdmaStartupChecks.checkBootVersion("4.0.3"));
		assertThatNoException().isThrownBy(() -> RdmaStartupChecks.checkBootVersion("4.1.1"));
		assertThat(RdmaStartupChecks.bootVersion()).startsWith("4.");
	}

	@Test
	void registeredForEveryApplication() {
		assertThat(SpringFactoriesLoader.forDefaultResourceLocation().load(ApplicationContextInitializer.class))
			.hasAtLeastOneElementOfType(RdmaStartupChecks.class);
	}

	@Test
	void noAdviceWhenNativeAccessIsEnabled() {
		// the test JVM runs with --enable-native-access=ALL-UNNAMED (rdma.test.argLine)
		assertThat(RdmaStartupChecks.nativeAccessAdvice(RdmaStartupChecks.class.getModule())).isNull();
	}

	@Test
	void oneLineSaysWhatToAddWhenNativeAccessIsNotEnabled() throws Exception {
		List<String> without = runChild();
		assertThat(without).filteredOn(line -> line.contains(ADVICE))
			.singleElement()
			.asString()
			.contains("'Enable-Native-Access: ALL-UNNAMED'", "--enable-native-access=ALL-UNNAMED");
		assertThat(without).contains("child started");

		List<String> with = runChild("--enable-native-access=ALL-UNNAMED");
		assertThat(with).noneMatch(line -> line.contains(ADVICE));
		assertThat(with).contains("child started");
	}

	private static List<String> runChild(String... jvmArguments) throws IOException, InterruptedException {
		List<String> command = new ArrayList<>();
		command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
		command.addAll(List.of(jvmArguments));
		command.addAll(List.of("-cp", System.getProperty("java.class.path"), Child.class.getName()));
		Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
		process.getOutputStream().close();
		byte[] output = process.getInputStream().readAllBytes();
		assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
		List<String> lines = new String(output, StandardCharsets.UTF_8).lines().toList();
		assertThat(process.exitValue()).as(String.join("\n", lines)).isZero();
		return lines;
	}

	/** A Spring Boot application with the starter's auto-configuration, nothing else. */
	@Configuration(proxyBeanMethods = false)
	@EnableAutoConfiguration
	static class Child {

		public static void main(String[] args) {
			new SpringApplicationBuilder(Child.class).web(WebApplicationType.NONE)
				.properties("spring.main.banner-mode=off", "rdma.required=false")
				.run()
				.close();
			System.out.println("child started");
		}

	}

}
