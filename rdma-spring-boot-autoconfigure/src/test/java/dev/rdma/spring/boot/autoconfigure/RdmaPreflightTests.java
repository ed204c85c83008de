package dev.rdma.spring.boot.autoconfigure;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.Banner;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.mock.env.MockEnvironment;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.LockedMemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatNoException;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * The deployment checks made before the context refreshes: a configuration that pins more
 * than the locked-memory limit fails there, with the message of
 * {@link PinnedMemory#check}, before any bean exists.
 */
class RdmaPreflightTests {

	private static final LockedMemory.Limit DOCKER = new LockedMemory.Limit(8L << 20, 8L << 20, false);

	private static final String[] OVER_EIGHT_MEGABYTES = { "rdma.required=true", "rdma.devices.nic0.name=rxe0",
			"rdma.completion-queues.cq.entries=1024", "rdma.connections.orders.listen=10.0.0.2:7471",
			"rdma.connections.orders.send-queue=cq", "rdma.connections.orders.receive-queue=cq",
			"rdma.connections.orders.max-peers=8", "rdma.connections.orders.message-size=16384" };

	@Test
	void aConfigurationOverTheLimitFailsWithThePinnedMemoryMessage() {
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> RdmaPreflight.check(environment(OVER_EIGHT_MEGABYTES), () -> DOCKER));
		assertThat(ex).as("the preflight fails").isNotNull();
		assertThat(ex.property()).isEqualTo("rdma.connections.orders.message-size");
		assertThat(ex.reason()).contains("more than the 8388608 bytes (8 MiB, RLIMIT_MEMLOCK) this process may lock");
		assertThat(ex.action()).contains("docker run --ulimit memlock=-1", "LimitMEMLOCK=infinity");
	}

	@Test
	void aConfigurationWithinTheLimitPasses() {
		assertThatNoException().isThrownBy(() -> RdmaPreflight.check(environment(OVER_EIGHT_MEGABYTES),
				() -> new LockedMemory.Limit(64L << 20, 64L << 20, false)));
	}

	@Test
	void withoutRdmaPropertiesOrWithTheAutoConfigurationExcludedNothingIsChecked() {
		AtomicInteger asked = new AtomicInteger();
		RdmaPreflight.check(environment("spring.application.name=demo"), () -> {
			asked.incrementAndGet();
			return DOCKER;
		});
		MockEnvironment excluded = environment(OVER_EIGHT_MEGABYTES);
		excluded.setProperty("spring.autoconfigure.exclude", RdmaAutoConfiguration.class.getName());
		RdmaPreflight.check(excluded, () -> {
			asked.incrementAndGet();
			return DOCKER;
		});
		assertThat(asked).as("the limit was not even read").hasValue(0);
	}

	/**
	 * A YAML list ({@code exclude:} then {@code - ...RdmaAutoConfiguration}) binds as
	 * {@code spring.autoconfigure.exclude[0]}: excluded as well (before, only the
	 * comma-separated form was seen, and an application that excluded RDMA failed here).
	 */
	@Test
	void anExclusionWrittenAsAListIsSeen() {
		AtomicInteger asked = new AtomicInteger();
		MockEnvironment excluded = environment(OVER_EIGHT_MEGABYTES);
		excluded.setProperty("spring.autoconfigure.exclude[0]", "org.example.OtherAutoConfiguration");
		excluded.setProperty("spring.autoconfigure.exclude[1]", RdmaAutoConfiguration.class.getName());
		RdmaPreflight.check(excluded, () -> {
			asked.incrementAndGet();
			return DOCKER;
		});
		assertThat(asked).as("the limit was not even read").hasValue(0);
		MockEnvironment other = environment(OVER_EIGHT_MEGABYTES);
		other.setProperty("spring.autoconfigure.exclude[0]", "org.example.OtherAutoConfiguration");
		assertThat(
				catchThrowableOfType(RdmaConfigurationException.class, () -> RdmaPreflight.check(other, () -> DOCKER)))
			.as("another auto-configuration excluded: still checked")
			.isNotNull();
	}

	/**
	 * A value the validation refuses is the auto-configuration's to report, naming its
	 * property: {@code max-peers=2000} (at most 1024) pins far more than the limit, and
	 * before, the preflight failed first telling to lower {@code message-size}.
	 */
	@Test
	void anInvalidValueIsLeftToTheAutoConfigurationsMessage() {
		MockEnvironment invalid = environment(OVER_EIGHT_MEGABYTES);
		invalid.setProperty("rdma.connections.orders.max-peers", "2000");
		assertThatNoException().isThrownBy(() -> RdmaPreflight.check(invalid, () -> DOCKER));
	}

	@Test
	void propertiesThatDoNotBindAreLeftToTheAutoConfigurationsMessage() {
		MockEnvironment unknownKey = environment(OVER_EIGHT_MEGABYTES);
		unknownKey.setProperty("rdma.connections.orders.mesage-size", "1");
		assertThatNoException().isThrownBy(() -> RdmaPreflight.check(unknownKey, () -> DOCKER));
	}

	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void theApplicationFailsBeforeAnyBeanIsCreated(CapturedOutput output) {
		Beans.created.set(false);
		SpringApplicationBuilder builder = new SpringApplicationBuilder(Beans.class).web(WebApplicationType.NONE)
			.initializers(new RdmaStartupChecks(() -> DOCKER))
			.properties(OVER_EIGHT_MEGABYTES)
			.properties("spring.autoconfigure.exclude=");
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> builder.run().close());
		assertThat(ex).as("startup failed").isNotNull();
		assertThat(ex.reason()).contains("of locked memory, more than the");
		assertThat(Beans.created).as("no bean was created before the failure").isFalse();
		assertThat(output).as("analysed as every RDMA configuration failure")
			.contains("APPLICATION FAILED TO START", "Property: rdma.connections.orders.message-size");
	}

	private static MockEnvironment environment(String... pairs) {
		MockEnvironment environment = new MockEnvironment();
		for (String pair : pairs) {
			int eq = pair.indexOf('=');
			environment.setProperty(pair.substring(0, eq), pair.substring(eq + 1));
		}
		return environment;
	}

	@Configuration(proxyBeanMethods = false)
	static class Beans {

		static final AtomicBoolean created = new AtomicBoolean();

		@Bean
		String marker() {
			created.set(true);
			return "created";
		}

	}

}
