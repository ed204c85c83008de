package dev.rdma.spring.boot.autoconfigure;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.time.Duration;

import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.BeanCreationException;
import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.mock.env.MockEnvironment;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.annotation.RdmaCompletionListenerAnnotationBeanPostProcessor;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.ListenerInvoker;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletion;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.when;

/**
 * Listener misconfiguration is reported at startup, naming the listener; nothing native
 * is touched.
 */
class RdmaListenerValidationTests {

	@Configuration(proxyBeanMethods = false)
	@EnableConfigurationProperties(RdmaProperties.class)
	@Import(RdmaAnnotationDrivenConfiguration.class)
	static class Infrastructure {

	}

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withUserConfiguration(Infrastructure.class)
		.withPropertyValues("rdma.devices.nic0.name=rxe0", "rdma.completion-queues.rx.type=extended",
				"rdma.completion-queues.rx.wc-flags=byte-len,qp-num", "rdma.completion-queues.tx.type=legacy");

	static class UnknownQueue {

		@RdmaCompletionListener(queue = "rxx")
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class TwoOnOneQueue {

		@RdmaCompletionListener(queue = "rx")
		void first(WorkCompletion wc) {
		}

	}

	static class SecondOnSameQueue {

		@RdmaCompletionListener(queue = "rx")
		void second(WorkCompletion wc) {
		}

	}

	static class WrongType {

		@RdmaCompletionListener(queue = "rx")
		void onCompletion(String wc) {
		}

	}

	static class BatchWithSingleParameter {

		@RdmaCompletionListener(queue = "tx", batch = true)
		void onBatch(WorkCompletion wc) {
		}

	}

	static class SingleWithBatchParameter {

		@RdmaCompletionListener(queue = "tx")
		void onBatch(CompletionBatch batch) {
		}

	}

	static class TwoParameters {

		@RdmaCompletionListener(queue = "rx")
		void onCompletion(WorkCompletion wc, String extra) {
		}

	}

	static class FieldNotRequested {

		@RdmaCompletionListener(queue = "rx", fields = { WcExFlag.BYTE_LEN, WcExFlag.COMPLETION_TIMESTAMP })
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class ThreeFieldsMissing {

		@RdmaCompletionListener(queue = "rx",
				fields = { WcExFlag.BYTE_LEN, WcExFlag.COMPLETION_TIMESTAMP, WcExFlag.SRC_QP, WcExFlag.FLOW_TAG })
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class FieldOnLegacy {

		@RdmaCompletionListener(queue = "tx", fields = WcExFlag.FLOW_TAG)
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class UnknownErrorHandler {

		@RdmaCompletionListener(queue = "rx", errorHandler = "noSuchHandler")
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class StaticListener {

		@RdmaCompletionListener(queue = "rx")
		static void onCompletion(WorkCompletion wc) {
		}

	}

	private void assertListenerFailure(String message, Class<?>... listeners) {
		long open = NativeObjects.open();
		@SuppressWarnings("unchecked")
		Class<Object> first = (Class<Object>) listeners[0];
		@SuppressWarnings("unchecked")
		Class<Object> second = (Class<Object>) (listeners.length > 1 ? listeners[1] : Object.class);
		runner.withBean("first", first).withBean("second", second).run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			StringBuilder all = new StringBuilder();
			boolean analysable = false;
			for (Throwable t = failure; t != null; t = t.getCause()) {
				all.append(t.getMessage()).append('\n');
				analysable |= t instanceof RdmaConfigurationException;
			}
			assertThat(analysable).as("RdmaConfigurationException in the cause chain").isTrue();
			assertThat(all.toString()).contains(message);
			FailureAnalysis analysis = new RdmaFailureAnalyzer().analyze(failure);
			assertThat(analysis.getDescription()).contains("@RdmaCompletionListener").contains(message);
			// a listener is labelled as one, not as a property
			assertThat(analysis.getDescription()).contains("Listener: @RdmaCompletionListener")
				.doesNotContain("Property:");
			assertThat(analysis.getAction()).isNotBlank();
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	static Stream<Arguments> listenerMistakes() {
		return Stream.of(Arguments
			.of("unknownQueue", "@RdmaCompletionListener UnknownQueue.onCompletion(WorkCompletion) of bean 'first' "
					+ "listens to queue 'rxx', which is not configured under rdma.completion-queues (configured: [rx, tx])",
					new Class<?>[] { UnknownQueue.class }),
				Arguments.of("twoListenersOnOneQueue",
						"queue 'rx' has two listeners: @RdmaCompletionListener TwoOnOneQueue.first(WorkCompletion) "
								+ "of bean 'first' and @RdmaCompletionListener SecondOnSameQueue.second(WorkCompletion) of bean 'second'",
						new Class<?>[] { TwoOnOneQueue.class, SecondOnSameQueue.class }),
				Arguments.of("parameterTypeItCannotSupply",
						"WrongType.onCompletion(String) of bean 'first' takes a String, which a completion "
								+ "listener cannot supply",
						new Class<?>[] { WrongType.class }),
				Arguments.of("batchTrueWithWorkCompletionParameter",
						"BatchWithSingleParameter.onBatch(WorkCompletion) of bean 'first' is declared batch = true "
								+ "but its parameter is WorkCompletion, not CompletionBatch",
						new Class<?>[] { BatchWithSingleParameter.class }),
				Arguments.of("batchParameterWithoutBatchTrue",
						"SingleWithBatchParameter.onBatch(CompletionBatch) of bean 'first' takes a CompletionBatch "
								+ "but is not declared batch = true",
						new Class<?>[] { SingleWithBatchParameter.class }),
				Arguments.of("twoParameters",
						"TwoParameters.onCompletion(WorkCompletion, String) of bean 'first' has 2 parameters",
						new Class<?>[] { TwoParameters.class }),
				Arguments.of("fieldTheQueueDoesNotProvide",
						"FieldNotRequested.onCompletion(WorkCompletion) of bean 'first' reads field "
								+ "completion-timestamp, but queue 'rx' (type extended) does not provide it "
								+ "(rdma.completion-queues.rx.wc-flags=[byte-len, qp-num])",
						new Class<?>[] { FieldNotRequested.class }),
				Arguments.of("everyMissingFieldIsNamedInTheYamlSpelling",
						"ThreeFieldsMissing.onCompletion(WorkCompletion) of bean 'first' reads fields "
								+ "[completion-timestamp, src-qp, flow-tag], but queue 'rx' (type extended) does not provide them "
								+ "(rdma.completion-queues.rx.wc-flags=[byte-len, qp-num])",
						new Class<?>[] { ThreeFieldsMissing.class }),
				Arguments.of("extendedFieldOnLegacyQueue",
						"reads field flow-tag, but queue 'tx' (type legacy) does not provide it",
						new Class<?>[] { FieldOnLegacy.class }),
				Arguments.of("unknownErrorHandler",
						"UnknownErrorHandler.onCompletion(WorkCompletion) of bean 'first' names errorHandler "
								+ "'noSuchHandler', which is not a RdmaCompletionErrorHandler bean",
						new Class<?>[] { UnknownErrorHandler.class }),
				Arguments.of("staticListener", "StaticListener.onCompletion(WorkCompletion) of bean 'first' is static",
						new Class<?>[] { StaticListener.class }));
	}

	/**
	 * A listener mistake fails startup naming the listener (see assertListenerFailure).
	 */
	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("listenerMistakes")
	void listenerMistakeFailsStartupNamingTheListener(String mistake, String message, Class<?>[] listeners) {
		assertListenerFailure(message, listeners);
	}

	@Test
	void listenerOnUnconfiguredQueueWhenRdmaBacksOff() {
		// With no queue beans (auto-configuration backed off) a listener cannot start:
		// the message says so.
		runner.withBean("first", TwoOnOneQueue.class).run(context -> {
			assertThat(context).hasFailed();
			StringBuilder all = new StringBuilder();
			for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
				all.append(t.getMessage()).append('\n');
			}
			assertThat(all.toString())
				.contains("listens to queue 'rx', but no completion queue bean of that name exists");
		});
	}

	// ------------------------------------------------------------------ discovery
	// through proxies, fast invoker

	public interface Receiver {

		void onCompletion(WorkCompletion wc);

	}

	public static class Target implements Receiver {

		final List<Long> seen = new ArrayList<>();

		@Override
		@RdmaCompletionListener(queue = "rx")
		public void onCompletion(WorkCompletion wc) {
			seen.add(wc.wrId());
		}

		@RdmaCompletionListener(queue = "tx", batch = true)
		int onBatch(CompletionBatch batch) {
			seen.add(-(long) batch.size());
			return batch.size();
		}

	}

	public static class InterfaceOnly implements Receiver {

		final List<Long> seen = new ArrayList<>();

		@Override
		@RdmaCompletionListener(queue = "rx")
		public void onCompletion(WorkCompletion wc) {
			seen.add(wc.wrId());
		}

	}

	private RdmaCompletionListenerAnnotationBeanPostProcessor processor() {
		RdmaCompletionListenerAnnotationBeanPostProcessor processor = new RdmaCompletionListenerAnnotationBeanPostProcessor();
		MockEnvironment environment = new MockEnvironment().withProperty("rdma.completion-queues.rx.type", "extended")
			.withProperty("rdma.completion-queues.tx.type", "legacy");
		RdmaProperties properties = Binder.get(environment).bind(RdmaProperties.PREFIX, RdmaProperties.class).get();
		processor.setEndpointValidator(new RdmaPropertiesListenerValidator(properties));
		processor.setBeanFactory(new DefaultListableBeanFactory());
		return processor;
	}

	@Test
	void discoversListenersThroughJdkAndCglibProxiesAndInvokesThem() throws Throwable {
		WorkCompletion wc = mock(WorkCompletion.class);
		when(wc.wrId()).thenReturn(42L);
		CompletionBatch batch = mock(CompletionBatch.class);
		when(batch.size()).thenReturn(3);

		InterfaceOnly target = new InterfaceOnly();
		ProxyFactory jdk = new ProxyFactory(target);
		jdk.addInterface(Receiver.class);
		Object jdkProxy = jdk.getProxy();
		RdmaCompletionListenerAnnotationBeanPostProcessor processor = processor();
		processor.postProcessAfterInitialization(jdkProxy, "jdkBean");
		List<RdmaListenerEndpoint> endpoints = processor.endpoints();
		assertThat(endpoints).extracting(RdmaListenerEndpoint::queue).containsExactly("rx");
		RdmaListenerEndpoint rx = endpoints.stream().filter(e -> e.queue().equals("rx")).findFirst().orElseThrow();
		assertThat(rx.batch()).isFalse();
		rx.invoker().invoke(wc);
		assertThat(target.seen).containsExactly(42L);

		Target target2 = new Target();
		ProxyFactory cglib = new ProxyFactory(target2);
		cglib.setProxyTargetClass(true);
		RdmaCompletionListenerAnnotationBeanPostProcessor processor2 = processor();
		processor2.postProcessAfterInitialization(cglib.getProxy(), "cglibBean");
		for (RdmaListenerEndpoint e : processor2.endpoints()) {
			e.invoker().invoke(e.batch() ? batch : wc);
		}
		assertThat(target2.seen).containsExactlyInAnyOrder(42L, -3L);
	}

	static final class PrivateHolder {

		long last;

		@SuppressWarnings("unused")
		private String take(WorkCompletion wc) {
			last = wc.wrId();
			return "ignored";
		}

	}

	@Test
	void invokerCallsPrivateMethodsAndDropsTheResult() throws Throwable {
		WorkCompletion wc = mock(WorkCompletion.class);
		when(wc.wrId()).thenReturn(7L);
		PrivateHolder holder = new PrivateHolder();
		ListenerInvoker invoker = ListenerInvoker.bind(holder,
				PrivateHolder.class.getDeclaredMethod("take", WorkCompletion.class));
		invoker.invoke(wc);
		assertThat(holder.last).isEqualTo(7L);
		assertThat(invoker).isNotInstanceOf(java.lang.reflect.Method.class);
	}

	@Configuration(proxyBeanMethods = false)
	static class NoListeners {

		@Bean
		String plain() {
			return "x";
		}

	}

	@Test
	void contextWithoutListenersStartsAndStopsCleanly() {
		runner.withUserConfiguration(NoListeners.class).run(context -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainers()).isEmpty();
		});
	}

	// ------------------------------------------------------------------ beans created
	// after startup (lazy, prototype)

	static class LateListener {

		@RdmaCompletionListener(queue = "rx")
		void onCompletion(WorkCompletion wc) {
		}

	}

	static class LateMessageListener {

		@RdmaMessageListener(connection = "orders")
		void onMessage(RdmaMessage message) {
		}

	}

	@Test
	void listenerOfABeanCreatedAfterStartupIsRegisteredAndStartedAtOnce() {
		CompletionQueueListenerContainer container = mock(CompletionQueueListenerContainer.class);
		RdmaListenerContainerFactory factory = endpoint -> {
			assertThat(endpoint.queue()).isEqualTo("rx");
			return container;
		};
		runner
			.withBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME, RdmaListenerContainerFactory.class, () -> factory)
			.withBean("late", LateListener.class, LateListener::new, bd -> bd.setLazyInit(true))
			.run(context -> {
				assertThat(context).hasNotFailed();
				RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
				assertThat(registry.isRunning()).isTrue();
				assertThat(registry.getListenerContainer("rx")).as("not created yet").isNull();
				context.getBean("late");
				assertThat(registry.getListenerContainer("rx")).isSameAs(container);
				verify(container).start();
			});
	}

	@Test
	void listenerOfABeanCreatedAfterStartupIsChecked() {
		// no queue beans here: a registered listener cannot get its container
		runner.withBean("late", LateListener.class, LateListener::new, bd -> bd.setLazyInit(true)).run(context -> {
			assertThat(context).hasNotFailed();
			assertThatExceptionOfType(BeanCreationException.class).isThrownBy(() -> context.getBean("late"))
				.withStackTraceContaining("listens to queue 'rx', but no completion queue bean of that name exists");
		});
	}

	@Test
	void messageListenerOfABeanCreatedAfterTheConnectionsStartedIsRefused() {
		runner
			.withBean(RdmaConnectionRegistry.class, () -> new RdmaConnectionRegistry(List.of(), Duration.ofSeconds(5)))
			.withBean("late", LateMessageListener.class, LateMessageListener::new, bd -> bd.setLazyInit(true))
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(context.getBean(RdmaConnectionRegistry.class).isRunning()).isTrue();
				assertThatExceptionOfType(BeanCreationException.class).isThrownBy(() -> context.getBean("late"))
					.withStackTraceContaining("@RdmaMessageListener LateMessageListener.onMessage(RdmaMessage) of "
							+ "bean 'late' belongs to a bean created after the RDMA connections started");
			});
	}

}
