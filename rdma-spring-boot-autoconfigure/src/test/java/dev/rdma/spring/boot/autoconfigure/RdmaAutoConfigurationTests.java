package dev.rdma.spring.boot.autoconfigure;

import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionEvaluationReport;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.boot.autoconfigure.metrics.RdmaMetricsAutoConfiguration;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.PollerMetrics;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * Host tests (no RDMA device): back-off, required=true, and every bad input, each failing
 * before anything native is opened.
 */
class RdmaAutoConfigurationTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(RdmaAutoConfigurations.all());

	@Test
	void backsOffWithoutDeviceWhenNotRequired() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		long open = NativeObjects.open();
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.entries=64")
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(context).doesNotHaveBean(Context.class);
				assertThat(context).doesNotHaveBean(CompletionQueue.class);
				assertThat(context).doesNotHaveBean(RdmaResources.class);
				assertThat(context).doesNotHaveBean(RdmaListenerEndpointRegistry.class);
				ConditionEvaluationReport report = ConditionEvaluationReport.get(context.getBeanFactory());
				StringBuilder outcome = new StringBuilder();
				report.getConditionAndOutcomesBySource()
					.get(RdmaAutoConfiguration.class.getName())
					.forEach(co -> outcome.append(co.getOutcome().getMessage()).append('\n'));
				// reads as a sentence: "RDMA is not available: no RDMA device found
				// (...)"
				assertThat(outcome).containsAnyOf("RDMA is not available: no RDMA device found",
						"RDMA is not available: libibverbs is not available");
				assertThat(outcome).doesNotContain("RDMA available no");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void requiredFailsStartupWithAnalysedMessage() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		long open = NativeObjects.open();
		runner.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=mlx5_0").run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			assertThat(failure).isInstanceOf(RdmaConfigurationException.class)
				.hasMessageContaining("rdma.required=true but")
				.hasMessageContaining(Rdma.isAvailable() ? "no RDMA device found" : "libibverbs is not available");
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(failure);
			assertThat(analysis).isNotNull();
			assertThat(analysis.getDescription()).contains("Property: rdma.required")
				.contains("rdma.required=true but");
			assertThat(analysis.getAction()).contains("rdma.required=false");
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void healthAndMetricsAreAutoConfigurationsOfTheirOwnAfterTheRoot() {
		assertThat(RdmaAutoConfigurations.names()).containsExactly(RdmaStatusAutoConfiguration.class.getName(),
				RdmaAutoConfiguration.class.getName(), RdmaMetricsAutoConfiguration.class.getName(),
				RdmaHealthAutoConfiguration.class.getName());
		for (Class<?> type : List.of(RdmaMetricsAutoConfiguration.class, RdmaHealthAutoConfiguration.class)) {
			AutoConfiguration annotation = type.getAnnotation(AutoConfiguration.class);
			assertThat(annotation).as(type.getSimpleName()).isNotNull();
			assertThat(annotation.after()).as(type.getSimpleName()).containsExactly(RdmaAutoConfiguration.class);
		}
		assertThat(RdmaHealthAutoConfiguration.class.getAnnotation(ConditionalOnEnabledHealthIndicator.class).value())
			.isEqualTo("rdma");
		// the root imports neither (ArchitectureTests checks the packages too)
		Import imports = RdmaAutoConfiguration.class.getAnnotation(Import.class);
		assertThat(imports.value()).doesNotContain(RdmaMetricsAutoConfiguration.class,
				RdmaHealthAutoConfiguration.class);
		assertThat(RdmaBeanRegistrar.LATER_BEAN_NAMES).containsExactlyInAnyOrder(
				RdmaHealthAutoConfiguration.HEALTH_INDICATOR_BEAN_NAME,
				RdmaMetricsAutoConfiguration.POLLER_METRICS_BEAN_NAME,
				RdmaMetricsAutoConfiguration.CONNECTION_METRICS_BEAN_NAME,
				RdmaMetricsAutoConfiguration.MEMORY_METRICS_BEAN_NAME);
	}

	@Test
	void healthAndMetricsBackOffWithTheRoot() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0").run(context -> {
			assertThat(context).hasNotFailed();
			assertThat(context).doesNotHaveBean(RdmaHealthIndicator.class);
			assertThat(context).doesNotHaveBean(PollerMetrics.Factory.class);
			ConditionEvaluationReport report = ConditionEvaluationReport.get(context.getBeanFactory());
			for (Class<?> type : List.of(RdmaMetricsAutoConfiguration.class, RdmaHealthAutoConfiguration.class)) {
				var outcomes = report.getConditionAndOutcomesBySource().get(type.getName());
				assertThat(outcomes).as(type.getSimpleName()).isNotNull();
				assertThat(outcomes.isFullMatch()).as(type.getSimpleName()).isFalse();
				StringBuilder text = new StringBuilder();
				outcomes.forEach(co -> text.append(co.getOutcome().getMessage()).append('\n'));
				assertThat(text).as(type.getSimpleName()).contains(RdmaResources.class.getName());
			}
		});
	}

	@Test
	void keyNamedLikeALaterAutoConfigurationsBeanFails() {
		long open = NativeObjects.open();
		for (String name : RdmaBeanRegistrar.LATER_BEAN_NAMES) {
			runner.withPropertyValues("rdma.required=true", "rdma.devices[" + name + "].name=a").run(context -> {
				assertThat(context).hasFailed();
				// the starter's own bean, not one "the application already defines"
				assertThat(context.getStartupFailure()).hasMessageContaining("rdma.devices." + name
						+ " would be a bean named '" + name + "', a name the starter keeps for its own bean");
			});
		}
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Configuration(proxyBeanMethods = false)
	@org.springframework.boot.context.properties.EnableConfigurationProperties(RdmaProperties.class)
	@Import(RdmaAnnotationDrivenConfiguration.class)
	static class ListenerInfrastructure {

	}

	@Test
	void everyBeanNameOfTheStarterIsReservedForIt() {
		assertThat(RdmaPropertiesValidator.STARTER_BEANS)
			.containsKeys(RdmaBeanRegistrar.LATER_BEAN_NAMES.toArray(String[]::new));
		assertThat(RdmaPropertiesValidator.STARTER_BEANS).containsKeys(RdmaBeanRegistrar.MONITOR_BEAN_NAME,
				RdmaBeanRegistrar.REPORT_BEAN_NAME, RdmaResources.BEAN_NAME, RdmaStatus.BEAN_NAME,
				RdmaConfigurationCheckRegistrar.LISTENER_CHECK_BEAN_NAME);
		runner.withUserConfiguration(ListenerInfrastructure.class).run(context -> {
			for (String name : context.getBeanDefinitionNames()) {
				if (name.matches("rdma[A-Z][A-Za-z]*")) {
					assertThat(RdmaPropertiesValidator.STARTER_BEANS).as(name).containsKey(name);
				}
			}
		});
		for (String name : List.of(RdmaStatus.BEAN_NAME, "rdmaListenerEndpointRegistry")) {
			runner.withPropertyValues("rdma.devices." + name + ".name=a").run(context -> {
				assertThat(context).hasFailed();
				assertThat(context.getStartupFailure())
					.hasMessageContaining("a name the starter keeps for its own bean");
			});
		}
	}

	@Test
	void failureAnalyzerIsRegisteredInSpringFactories() throws java.io.IOException {
		java.util.List<String> analyzers = new java.util.ArrayList<>();
		var resources = getClass().getClassLoader().getResources("META-INF/spring.factories");
		while (resources.hasMoreElements()) {
			java.util.Properties factories = org.springframework.core.io.support.PropertiesLoaderUtils
				.loadProperties(new org.springframework.core.io.UrlResource(resources.nextElement()));
			analyzers.add(factories.getProperty(FailureAnalyzer.class.getName(), ""));
		}
		assertThat(analyzers).anyMatch(a -> a.contains(RdmaFailureAnalyzer.class.getName()));
	}

	static Stream<Arguments> badInputs() {
		return Stream.of(bad("rdma.devices.nic0.name must not be blank", "rdma.devices.nic0.name= "),
				bad("rdma.devices.nic0 sets both name=mlx5_0 and guid=0x1", "rdma.devices.nic0.name=mlx5_0",
						"rdma.devices.nic0.guid=0x1"),
				bad("rdma.devices.nic0.guid=0xnothex is not a 64-bit hex GUID", "rdma.devices.nic0.guid=0xnothex"),
				bad("rdma.devices.nic0.guid=0x11112222333344445 is not a 64-bit hex GUID",
						"rdma.devices.nic0.guid=0x11112222333344445"),
				bad("rdma.devices.nic0.port=0 is not a port number", "rdma.devices.nic0.port=0"),
				bad("rdma.channels.events0.device=nic9 names no device under rdma.devices (configured: [nic0])",
						"rdma.devices.nic0.name=a", "rdma.channels.events0.device=nic9"),
				bad("rdma.channels.events0.device is not set and 2 devices are configured [nic0, nic1]",
						"rdma.devices.nic0.name=a", "rdma.devices.nic1.name=b",
						"rdma.channels.events0.non-blocking=true"),
				bad("rdma.channels.events0.non-blocking=false is not supported", "rdma.devices.nic0.name=a",
						"rdma.channels.events0.non-blocking=false"),
				bad("rdma.completion-queues.rx.device=nic7 names no device", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.device=nic7"),
				bad("rdma.completion-queues.rx.device is not set and no device is configured under rdma.devices",
						"rdma.completion-queues.rx.entries=16"),
				bad("rdma.completion-queues.rx.channel=events9 names no channel under rdma.channels",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.channel=events9"),
				bad("rdma.completion-queues.rx.channel=ev1 belongs to device nic1, but the queue is on device nic0",
						"rdma.devices.nic0.name=a", "rdma.devices.nic1.name=b", "rdma.channels.ev1.device=nic1",
						"rdma.completion-queues.rx.device=nic0", "rdma.completion-queues.rx.channel=ev1"),
				bad("rdma.completion-queues.rx.entries=0 must be at least 1", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.entries=0"),
				bad("rdma.completion-queues.rx.comp-vector=fast is neither auto nor a completion vector number",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.comp-vector=fast"),
				bad("rdma.completion-queues.rx.comp-vector=-2 is neither auto nor", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.comp-vector=-2"),
				bad("rdma.completion-queues.rx.wc-flags=[byte-len] needs an extended or efa queue; "
						+ "rdma.completion-queues.rx.type is legacy", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.type=legacy", "rdma.completion-queues.rx.wc-flags=byte-len"),
				bad("rdma.completion-queues.rx.flags=[single-threaded] needs an extended or efa queue",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.flags=single-threaded"),
				bad("rdma.completion-queues.rx.efa-wc-flags=[sgid] needs an efa queue; rdma.completion-queues.rx.type is extended",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.type=extended",
						"rdma.completion-queues.rx.efa-wc-flags=sgid"),
				bad("rdma.completion-queues.rx.polling.mode=event needs a completion channel, but "
						+ "rdma.completion-queues.rx.channel is not set", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.polling.mode=event"),
				bad("rdma.completion-queues.rx.polling.mode=adaptive needs a completion channel",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.polling.mode=adaptive"),
				bad("rdma.completion-queues.rx.polling.batch-size=0 must be between 1 and 65536",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.polling.batch-size=0"),
				bad("rdma.completion-queues.rx.polling.spin=PT-0.001S must not be negative", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.polling.spin=-1ms"),
				bad("rdma.completion-queues.rx.polling.max-sleep=PT0S must be positive", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.polling.max-sleep=0ms"),
				bad("rdma.completion-queues.rx.ack-batch=0 must be at least 1", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.ack-batch=0"),
				bad("rdma.completion-queues.nic0 clashes with rdma.devices.nic0", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.nic0.entries=4"),
				bad("rdma.channels.rx clashes with rdma.devices.rx", "rdma.devices.rx.name=a",
						"rdma.channels.rx.device=rx"),
				bad("rdma.shutdown-timeout=PT-1S must not be negative", "rdma.shutdown-timeout=-1s"),
				bad("rdma.shutdown-timeout=PT4800000H is longer than 24h, the longest an rdma.* duration may be",
						"rdma.shutdown-timeout=200000d"),
				bad("rdma.completion-queues.rx.polling.spin=PT4800000H is longer than 24h", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.polling.spin=200000d"),
				bad("rdma.completion-queues.rx.polling.max-sleep=PT4800000H is longer than 24h",
						"rdma.devices.nic0.name=a", "rdma.completion-queues.rx.polling.max-sleep=200000d"),
				bad("rdma.completion-queues.rx.type", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.type=fancy"),
				bad("rdma.completion-queues.rx.wc-flags", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.type=extended",
						"rdma.completion-queues.rx.wc-flags=byte-len,nonsense"),
				bad("rdma.completion-queues.rx.entries", "rdma.devices.nic0.name=a",
						"rdma.completion-queues.rx.entries=many"));
	}

	private static Arguments bad(String message, String... properties) {
		return Arguments.of(message, properties);
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("badInputs")
	void badInputFailsStartupNamingTheProperty(String message, String[] properties) {
		long open = NativeObjects.open();
		runner.withPropertyValues("rdma.required=true").withPropertyValues(properties).run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			StringBuilder all = new StringBuilder();
			for (Throwable t = failure; t != null; t = t.getCause()) {
				all.append(t.getMessage()).append('\n');
			}
			assertThat(all.toString()).contains(message);
			if (failure instanceof RdmaConfigurationException || hasCause(failure, RdmaConfigurationException.class)) {
				FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(failure);
				assertThat(analysis.getDescription()).contains(message);
				assertThat(analysis.getAction()).isNotBlank();
			}
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	private static boolean hasCause(Throwable failure, Class<? extends Throwable> type) {
		for (Throwable t = failure; t != null; t = t.getCause()) {
			if (type.isInstance(t)) {
				return true;
			}
		}
		return false;
	}

	@Configuration(proxyBeanMethods = false)
	static class UserBeanNamedNic0 {

		@Bean
		String nic0() {
			return "taken";
		}

	}

	@Test
	void keyClashingWithAnApplicationBeanFails() {
		long open = NativeObjects.open();
		runner.withUserConfiguration(UserBeanNamedNic0.class)
			.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=a")
			.run(context -> {
				assertThat(context).hasFailed();
				assertThat(context.getStartupFailure()).hasMessageContaining(
						"rdma.devices.nic0 would be a bean named 'nic0', but the application already defines a bean with that name");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

}
