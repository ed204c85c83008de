package dev.rdma.spring.boot.autoconfigure;

import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.LazyInitializationBeanFactoryPostProcessor;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.SystemEnvironmentPropertySource;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletion;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

/**
 * What a machine without RDMA (a CI runner) catches: whenever an {@code rdma.*} property
 * is set, every mistake that needs no device fails startup naming the property or the
 * listener, without {@code rdma.required}; unknown keys fail with the nearest valid name;
 * the {@link RdmaStatus} bean says why RDMA backed off; a missing RDMA bean is explained.
 */
class RdmaWithoutDeviceTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(RdmaAutoConfigurations.all());

	static Stream<Arguments> misconfigurations() {
		return Stream.of(
				Arguments.of("rdma.completion-queues.rx.channel=events9 names no channel under rdma.channels",
						new String[] { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.channel=events9" }),
				Arguments.of(
						"rdma.completion-queues.rx.efa-wc-flags=[sgid] needs an efa queue; "
								+ "rdma.completion-queues.rx.type is extended",
						new String[] { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.type=extended",
								"rdma.completion-queues.rx.efa-wc-flags=sgid" }),
				Arguments.of("rdma.completion-queues.rx.polling.mode=event needs a completion channel",
						new String[] { "rdma.devices.nic0.name=mlx5_0",
								"rdma.completion-queues.rx.polling.mode=event" }),
				Arguments.of("rdma.completion-queues.rx.device=nic7 names no device",
						new String[] { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.device=nic7" }),
				Arguments.of("rdma.devices.nic0.port=0 is not a port number",
						new String[] { "rdma.devices.nic0.port=0" }));
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("misconfigurations")
	void misconfigurationFailsWithoutDeviceAndWithoutRequired(String message, String[] properties) {
		long open = NativeObjects.open();
		runner.withPropertyValues(properties).run(context -> {
			assertThat(context).hasFailed();
			assertThat(StartupFailures.messages(context.getStartupFailure())).contains(message);
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(context.getStartupFailure());
			assertThat(analysis).isNotNull();
			assertThat(analysis.getDescription()).contains("Property: rdma.").contains(message);
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	static class UnknownQueueListener {

		@RdmaCompletionListener(queue = "rxx")
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class MissingFieldsListener {

		@RdmaCompletionListener(queue = "rx", fields = { WcExFlag.COMPLETION_TIMESTAMP, WcExFlag.FLOW_TAG })
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class GoodListener {

		@RdmaCompletionListener(queue = "rx")
		void onCompletion(WorkCompletion wc) {
		}

	}

	/** The interface a JDK proxy of {@link ProxiedListener} exposes: not the listener. */
	interface Named {

		String name();

	}

	static class ProxiedListener implements Named {

		@Override
		public String name() {
			return "proxied";
		}

		@RdmaCompletionListener(queue = "rx")
		public void onCompletion(WorkCompletion wc) {
		}

	}

	/**
	 * A listener that the bean as created cannot invoke (a JDK proxy whose interfaces
	 * lack the method) fails startup with a RdmaConfigurationException naming the
	 * listener, like every other listener mistake (before: a bare IllegalStateException
	 * of Spring's AopUtils that named no listener).
	 */
	@Test
	void aListenerItsBeansJdkProxyCannotInvokeFailsNamingTheListener() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.entries=64")
			.withBean("listener", Named.class, () -> {
				ProxyFactory proxy = new ProxyFactory(new ProxiedListener());
				proxy.addInterface(Named.class);
				proxy.setProxyTargetClass(false);
				return (Named) proxy.getProxy();
			})
			.run(context -> {
				assertThat(context).hasFailed();
				Throwable failure = context.getStartupFailure();
				while (failure != null && !(failure instanceof RdmaConfigurationException)) {
					failure = failure.getCause();
				}
				assertThat(failure).as("a RdmaConfigurationException in " + context.getStartupFailure())
					.isInstanceOf(RdmaConfigurationException.class)
					.hasMessageContaining("onCompletion")
					.hasMessageContaining("cannot be invoked on bean");
			});
	}

	static class WrongParameterMessageListener {

		@RdmaMessageListener(connection = "nosuch")
		void on(String message) {
		}

	}

	static class UnknownConnectionMessageListener {

		@RdmaMessageListener(connection = "nosuch")
		void on(RdmaMessage message) {
		}

	}

	static class GoodMessageListener {

		@RdmaMessageListener(connection = "orders")
		void on(RdmaMessage message) {
		}

	}

	static class UnknownErrorHandlerListener {

		@RdmaCompletionListener(queue = "tx", errorHandler = "nosuchHandler")
		void onCompletion(WorkCompletion wc) {
		}

	}

	private static final String[] ORDERS = { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.tx.entries=256",
			"rdma.connections.orders.connect=10.0.0.2:7471", "rdma.connections.orders.send-queue=tx",
			"rdma.connections.orders.receive-queue=tx" };

	@Test
	void goodMessageListenerStartsWithoutDevice() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner.withPropertyValues(ORDERS)
			.withBean("listener", GoodMessageListener.class)
			.run(context -> assertThat(context).hasNotFailed());
	}

	private static final String[] RX = { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.entries=64" };

	private static final String UNKNOWN_QUEUE = "listens to queue 'rxx', which is not "
			+ "configured under rdma.completion-queues (configured: [rx])";

	static Stream<Arguments> listenerMistakes() {
		return Stream.of(
				Arguments.of("unknown queue", RX, UnknownQueueListener.class, UNKNOWN_QUEUE,
						"Listener: @RdmaCompletionListener"),
				Arguments.of("message listener with a wrong parameter", ORDERS, WrongParameterMessageListener.class,
						"@RdmaMessageListener WrongParameterMessageListener.on(String) of bean 'listener' must "
								+ "take exactly one RdmaMessage parameter",
						"@RdmaMessageListener"),
				Arguments.of("message listener on an unknown connection", ORDERS,
						UnknownConnectionMessageListener.class,
						"listens to connection 'nosuch', which is not configured (rdma.connections: [orders])",
						"@RdmaMessageListener"),
				Arguments.of("unknown error handler",
						new String[] { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.tx.entries=64" },
						UnknownErrorHandlerListener.class,
						"names errorHandler 'nosuchHandler', which is not a RdmaCompletionErrorHandler bean",
						"Listener: @RdmaCompletionListener"),
				Arguments.of("fields the queue lacks",
						new String[] { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.type=extended",
								"rdma.completion-queues.rx.wc-flags=byte-len" },
						MissingFieldsListener.class,
						"reads fields [completion-timestamp, flow-tag], but queue 'rx' (type extended) does not "
								+ "provide them (rdma.completion-queues.rx.wc-flags=[byte-len])",
						"Listener: @RdmaCompletionListener"));
	}

	/**
	 * A listener mistake fails startup without a device, naming the listener; the failure
	 * analysis labels a completion listener as one and names a message listener.
	 */
	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("listenerMistakes")
	void listenerMistakeFailsWithoutDevice(String mistake, String[] properties, Class<?> listener, String message,
			String analysed) {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		assertListenerFails(runner, properties, listener, message, analysed);
	}

	@Test
	void listenerOnUnknownQueueFailsWithoutDeviceUnderLazyInitialization() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		assertListenerFails(runner.withInitializer(
				context -> context.addBeanFactoryPostProcessor(new LazyInitializationBeanFactoryPostProcessor())), RX,
				UnknownQueueListener.class, UNKNOWN_QUEUE, "Listener: @RdmaCompletionListener");
	}

	@SuppressWarnings("unchecked")
	private static void assertListenerFails(ApplicationContextRunner runner, String[] properties, Class<?> listener,
			String message, String analysed) {
		runner.withPropertyValues(properties).withBean("listener", (Class<Object>) listener).run(context -> {
			assertThat(context).hasFailed();
			assertThat(StartupFailures.messages(context.getStartupFailure())).contains(message);
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(context.getStartupFailure());
			assertThat(analysis.getDescription()).contains(analysed);
		});
	}

	@Test
	void listenerBeansStayEagerUnderLazyInitialization() {
		runner
			.withInitializer(
					context -> context.addBeanFactoryPostProcessor(new LazyInitializationBeanFactoryPostProcessor()))
			.withBean("listener", GoodListener.class)
			.withBean("other", StringBuilder.class)
			.run(context -> {
				assertThat(context).hasNotFailed();
				ConfigurableListableBeanFactory factory = context.getBeanFactory();
				assertThat(factory.getBeanDefinition("listener").isLazyInit()).isFalse();
				assertThat(factory.getBeanDefinition("other").isLazyInit()).as("lazy initialization applies").isTrue();
			});
	}

	@Test
	void validConfigurationWithListenerStartsWithoutDeviceAndTheStatusSaysWhy() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.entries=64")
			.withBean("listener", GoodListener.class)
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(context).doesNotHaveBean(Context.class);
				RdmaStatus status = context.getBean(RdmaStatus.class);
				assertThat(status.isActive()).isFalse();
				assertThat(status.isConfigured()).isTrue();
				assertThat(status.reason()).containsAnyOf("no RDMA device found", "libibverbs is not available");
				assertThat(context.getBeanProvider(Context.class).getIfAvailable()).isNull();
			});
	}

	@Test
	void statusBeanExistsWithoutAnyRdmaProperty() {
		runner.run(context -> {
			assertThat(context).hasNotFailed();
			RdmaStatus status = context.getBean(RdmaStatus.BEAN_NAME, RdmaStatus.class);
			assertThat(status.isConfigured()).isFalse();
			assertThat(status.isActive()).isEqualTo(context.containsBean(RdmaResources.BEAN_NAME));
			if (!status.isActive()) {
				assertThat(status.reason()).isNotBlank();
			}
			assertThat(context).doesNotHaveBean(RdmaConfigurationCheckRegistrar.LISTENER_CHECK_BEAN_NAME);
		});
	}

	static Stream<Arguments> typos() {
		return Stream.of(Arguments.of("rdma.completion-queue.rx.entries=4", "rdma.completion-queues.rx.entries"),
				Arguments.of("rdma.completion-queues.rx.entires=4", "rdma.completion-queues.rx.entries"),
				Arguments.of("rdma.completion-queues.rx.polling.mod=busy", "rdma.completion-queues.rx.polling.mode"),
				Arguments.of("rdma.completion-queues.rx.max-sleep=2ms", "rdma.completion-queues.rx.polling.max-sleep"),
				Arguments.of("rdma.devices.nic0.nmae=rxe0", "rdma.devices.nic0.name"),
				Arguments.of("rdma.channel.events0.device=nic0", "rdma.channels.events0.device"),
				Arguments.of("rdma.requried=true", "rdma.required"),
				Arguments.of("rdma.shutdown-timout=1s", "rdma.shutdown-timeout"));
	}

	static Stream<Arguments> badEnumValues() {
		return Stream.of(Arguments.of("rdma.connections.orders.exchange=out-of-bnd", "cm, out-of-band"),
				Arguments.of("rdma.completion-queues.rx.type=extnded", "legacy, extended, efa"),
				Arguments.of("rdma.completion-queues.rx.polling.mode=bsy", "busy, event, adaptive, backoff"),
				Arguments.of("rdma.pollers.shared.mode=spin", "busy, event, adaptive, backoff"),
				Arguments.of("rdma.completion-queues.rx.wc-flags=byte-len,qp-nm", "byte-len"));
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("badEnumValues")
	void aValueThatIsNotOneOfAnEnumsFailsNamingThePropertyTheValueAndTheAcceptedValuesAsWritten(String bad,
			String accepted) {
		String property = bad.substring(0, bad.indexOf('='));
		String value = bad.substring(bad.indexOf('=') + 1);
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0", bad).run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			assertThat(failure).isInstanceOf(RdmaConfigurationException.class);
			assertThat(failure.getMessage()).contains(property + "=" + value + " is not one of the accepted values ")
				.contains(accepted)
				.doesNotContain("OUT_OF_BAND", "EXTENDED", "BUSY", "BYTE_LEN");
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(failure);
			assertThat(analysis.getDescription()).contains("Property: " + property);
			assertThat(analysis.getAction()).contains("Set " + property + " to one of ").contains(accepted);
		});
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("typos")
	void unknownKeyFailsNamingTheNearestValidName(String typo, String nearest) {
		String unknown = typo.substring(0, typo.indexOf('='));
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0", typo).run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			assertThat(failure).isInstanceOf(RdmaConfigurationException.class);
			assertThat(failure.getMessage()).contains("unknown RDMA property " + unknown)
				.contains("did you mean " + nearest + "?");
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(failure);
			assertThat(analysis.getDescription()).contains("Property: " + unknown);
			assertThat(analysis.getAction()).contains("rename " + unknown + " to " + nearest);
		});
	}

	@Test
	void everyUnknownKeyIsNamed() {
		runner
			.withPropertyValues("rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.rx.entires=4",
					"rdma.completion-queues.tx.typ=legacy")
			.run(context -> assertThat(context.getStartupFailure().getMessage())
				.contains("did you mean rdma.completion-queues.rx.entries?")
				.contains("did you mean rdma.completion-queues.tx.type?"));
	}

	@Test
	void knownKeysInEveryFormPass() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner
			.withPropertyValues("rdma.devices.nic0.name=mlx5_0", "rdma.channels.events0.device=nic0",
					"rdma.completion-queues.rx.type=extended", "rdma.completion-queues.rx.wc-flags[0]=byte-len",
					"rdma.completion-queues.rx.wc-flags[1]=qp-num", "rdma.completion-queues.rx.flags=single-threaded",
					"rdma.completion-queues.rx.channel=events0", "rdma.completion-queues.rx.polling.mode=adaptive",
					"rdma.completion-queues.rx.polling.spin=20us", "rdma.completion-queues.rx.polling.batch-size=8",
					"rdma.completion-queues.rx.ack-batch=8", "rdma.completion-queues.rx.comp-vector=auto",
					"rdma.completion-queues.tx.polling.max-sleep=2ms", "rdma.completion-queues.tx.entries=16",
					"rdma.shutdown-timeout=2s", "rdma.required=false", "rdma.devices.nic0.port=1")
			.run(context -> assertThat(context).hasNotFailed());
	}

	@Test
	void environmentVariablesAreNotChecked() {
		// the environment is shared: RDMA_* variables of scripts and tools are not ours
		runner
			.withInitializer(context -> context.getEnvironment()
				.getPropertySources()
				.addFirst(new SystemEnvironmentPropertySource("testEnvironment",
						Map.of("RDMA_TEST_MODULES", "rdma-bindings", "RDMA_DEVICE_TEST_TIMEOUT", "2400"))))
			.withPropertyValues("rdma.devices.nic0.name=mlx5_0")
			.run(context -> assertThat(context).hasNotFailed());
	}

	@Test
	void theDocumentedApplicationYmlPassesTheChecks() throws Exception {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device (the yml names mlx5_0)").isFalse();
		String readme = java.nio.file.Files.readString(java.nio.file.Path.of("..", "docs", "configuration.md"));
		String start = "## application.yml\n\n```yaml\n";
		int from = readme.indexOf(start) + start.length();
		String yaml = readme.substring(from, readme.indexOf("```", from));
		var sources = new org.springframework.boot.env.YamlPropertySourceLoader()
			.load("docs/configuration.md application.yml", new org.springframework.core.io.ByteArrayResource(
					yaml.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
		assertThat(sources).isNotEmpty();
		runner.withInitializer(context -> sources.forEach(context.getEnvironment().getPropertySources()::addFirst))
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(context.getBean(RdmaStatus.class).isConfigured()).isTrue();
			});
	}

	static class NeedsContext {

		NeedsContext(Context context) {
		}

	}

	static class MaybeContext {

		final boolean rdma;

		MaybeContext(ObjectProvider<Context> context) {
			this.rdma = context.getIfAvailable() != null;
		}

	}

	@Test
	void aMissingRdmaBeanIsExplainedByTheBackOff() {
		assumeThat(DeviceTestSupport.hostHasDevice()).as("host without RDMA device").isFalse();
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0").withBean(NeedsContext.class).run(context -> {
			assertThat(context).hasFailed();
			FailureAnalysis analysis = new RdmaBackedOffFailureAnalyzer().analyze(context.getStartupFailure());
			assertThat(analysis).isNotNull();
			assertThat(analysis.getDescription()).contains("'dev.rdma.verbs.Context'")
				.contains("the RDMA auto-configuration backed off because")
				.containsAnyOf("no RDMA device found", "libibverbs is not available");
			assertThat(analysis.getAction()).contains("rdma.required=true")
				.contains("ObjectProvider<Context>")
				.contains("rdmaStatus");
		});
		// the documented way: ObjectProvider
		runner.withPropertyValues("rdma.devices.nic0.name=mlx5_0").withBean(MaybeContext.class).run(context -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(MaybeContext.class).rdma).isFalse();
		});
	}

	@Test
	void backedOffAnalyzerIsRegisteredAndRunsBeforeBoots() throws java.io.IOException {
		assertThat(new RdmaBackedOffFailureAnalyzer().getOrder())
			.isEqualTo(org.springframework.core.Ordered.HIGHEST_PRECEDENCE);
		var resources = getClass().getClassLoader().getResources("META-INF/spring.factories");
		StringBuilder analyzers = new StringBuilder();
		while (resources.hasMoreElements()) {
			analyzers.append(org.springframework.core.io.support.PropertiesLoaderUtils
				.loadProperties(new org.springframework.core.io.UrlResource(resources.nextElement()))
				.getProperty(org.springframework.boot.diagnostics.FailureAnalyzer.class.getName(), ""));
		}
		assertThat(analyzers.toString()).contains(RdmaBackedOffFailureAnalyzer.class.getName());
	}

}
