package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.annotation.Order;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.config.DefaultRdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerContainerCustomizer;
import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * The listener infrastructure on the host, with a stand-in completion queue (a mock that
 * hands out one successful completion): the registry asks the container factory for the
 * container, the factory is filled from the properties by the configurer, the customizer
 * beans change the container in their order, and the container's thread delivers the
 * completion to the listener.
 */
class RdmaListenerContainerFactoryTests {

	@Configuration(proxyBeanMethods = false)
	@EnableConfigurationProperties(RdmaProperties.class)
	@Import(RdmaAnnotationDrivenConfiguration.class)
	static class Infrastructure {

		/**
		 * A queue without a channel (backoff polling) that returns one completion on its
		 * first poll.
		 */
		@Bean
		CompletionQueue rx() {
			CompletionQueue queue = mock(CompletionQueue.class);
			WorkCompletion completion = mock(WorkCompletion.class);
			when(completion.wrId()).thenReturn(42L);
			when(completion.statusCode()).thenReturn(0);
			AtomicInteger polls = new AtomicInteger();
			when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
				if (polls.getAndIncrement() > 0) {
					return 0;
				}
				call.getArgument(1, CompletionHandler.class).onCompletion(completion);
				return 1;
			});
			return queue;
		}

		@Bean
		Listener listener() {
			return new Listener();
		}

	}

	static class Listener {

		final Set<String> threads = ConcurrentHashMap.newKeySet();

		final List<Long> ids = new CopyOnWriteArrayList<>();

		@RdmaCompletionListener(queue = "rx")
		void onCompletion(WorkCompletion wc) {
			threads.add(Thread.currentThread().getName());
			ids.add(wc.wrId());
		}

	}

	static final List<String> customized = new CopyOnWriteArrayList<>();

	@Configuration(proxyBeanMethods = false)
	static class Customizers {

		@Bean
		@Order(2)
		RdmaListenerContainerCustomizer doubleTheBatch() {
			return container -> {
				customized.add("double " + container.queue());
				container.setSettings(container.getSettings().withBatchSize(container.getSettings().batchSize() * 2));
			};
		}

		@Bean
		@Order(1)
		RdmaListenerContainerCustomizer batchOfSeven() {
			return container -> {
				customized.add("seven " + container.queue());
				container.setSettings(container.getSettings().withBatchSize(7));
			};
		}

	}

	@Configuration(proxyBeanMethods = false)
	static class EventModeWithoutChannel {

		@Bean
		RdmaListenerContainerCustomizer eventMode() {
			return container -> container.setSettings(container.getSettings().withMode(PollingMode.EVENT));
		}

	}

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withUserConfiguration(Infrastructure.class)
		.withPropertyValues("rdma.devices.nic0.name=rxe0", "rdma.completion-queues.rx.polling.batch-size=16",
				"rdma.completion-queues.rx.ack-batch=8", "rdma.completion-queues.rx.polling.spin=1ms");

	@Test
	void factoryIsFilledFromThePropertiesAndTheContainerDeliversOnItsThread() {
		CompletionQueueListenerContainer[] container = new CompletionQueueListenerContainer[1];
		runner.run(context -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME))
				.isInstanceOf(DefaultRdmaListenerContainerFactory.class);
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			container[0] = registry.getListenerContainer("rx");
			assertThat(container[0]).isNotNull();
			assertThat(container[0].getSettings().batchSize()).isEqualTo(16);
			assertThat(container[0].getSettings().ackBatch()).isEqualTo(8);
			assertThat(container[0].getSettings().spin()).isEqualTo(Duration.ofMillis(1));
			assertThat(container[0].mode()).isEqualTo(PollingMode.BACKOFF);
			assertThat(container[0].getListenerId())
				.isEqualTo("@RdmaCompletionListener Listener.onCompletion(WorkCompletion) of bean 'listener'");
			Listener listener = context.getBean(Listener.class);
			long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
			while (listener.ids.isEmpty() && System.nanoTime() < deadline) {
				Thread.sleep(5);
			}
			assertThat(listener.ids).containsExactly(42L);
			assertThat(listener.threads).containsExactly("rdma-poller-rx");
			assertThat(container[0].isRunning()).isTrue();
		});
		assertThat(container[0].isRunning()).as("poller thread after the context closed").isFalse();
	}

	@Test
	void customizerBeansChangeThePollerInTheirOrder() {
		customized.clear();
		runner.withUserConfiguration(Customizers.class).run(context -> {
			assertThat(context).hasNotFailed();
			CompletionQueueListenerContainer container = context.getBean(RdmaListenerEndpointRegistry.class)
				.getListenerContainer("rx");
			assertThat(customized).containsExactly("seven rx", "double rx");
			assertThat(container.getSettings().batchSize()).isEqualTo(14);
			// the factory's own settings stay as the properties say: each container has a
			// copy
			DefaultRdmaListenerContainerFactory factory = context.getBean(DefaultRdmaListenerContainerFactory.class);
			assertThat(factory.getPollerSettings("rx").batchSize()).isEqualTo(16);
		});
	}

	@Test
	void settingsThatDoNotFitTheQueueFailStartupAndLeaveNoPollerRunning() {
		runner.withUserConfiguration(EventModeWithoutChannel.class).run(context -> {
			assertThat(context).hasFailed();
			StringBuilder all = new StringBuilder();
			for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
				all.append(t.getMessage()).append('\n');
			}
			assertThat(all.toString()).contains("queue rx has no channel for EVENT polling");
		});
		assertThat(Thread.getAllStackTraces().keySet()).noneMatch(t -> t.getName().equals("rdma-poller-rx"));
	}

	@Configuration(proxyBeanMethods = false)
	static class OwnFactory {

		@Bean(name = RdmaListenerContainerFactory.DEFAULT_BEAN_NAME)
		DefaultRdmaListenerContainerFactory ownFactory(RdmaListenerContainerFactoryConfigurer configurer) {
			DefaultRdmaListenerContainerFactory factory = new DefaultRdmaListenerContainerFactory();
			configurer.configure(factory);
			factory.addContainerCustomizer(container -> container.setSettings(container.getSettings().withAckBatch(3)));
			return factory;
		}

	}

	@Test
	void anApplicationsOwnFactoryReplacesTheAutoConfiguredOne() {
		// as in an application: its own configuration is processed before the
		// (auto-)configuration of the starter
		new ApplicationContextRunner().withUserConfiguration(OwnFactory.class, Infrastructure.class)
			.withPropertyValues("rdma.devices.nic0.name=rxe0", "rdma.completion-queues.rx.polling.batch-size=16")
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(context.getBeansOfType(RdmaListenerContainerFactory.class))
					.containsOnlyKeys("rdmaListenerContainerFactory");
				CompletionQueueListenerContainer container = context.getBean(RdmaListenerEndpointRegistry.class)
					.getListenerContainer("rx");
				assertThat(container.getSettings().ackBatch()).isEqualTo(3);
				assertThat(container.getSettings().batchSize()).isEqualTo(16);
			});
	}

}
