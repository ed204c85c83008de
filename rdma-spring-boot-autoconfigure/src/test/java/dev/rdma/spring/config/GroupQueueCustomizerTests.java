package dev.rdma.spring.config;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.support.DefaultListableBeanFactory;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * A queue of a poller group polls in the group's mode and spin: a customizer's settings
 * with another mode or spin on its container would be ignored, so they are refused naming
 * the queue and the group; leaving the group makes them count.
 */
class GroupQueueCustomizerTests {

	private DefaultRdmaListenerContainerFactory factory() {
		DefaultListableBeanFactory beans = new DefaultListableBeanFactory();
		CompletionQueue rx = mock(CompletionQueue.class);
		when(rx.channel()).thenReturn(mock(CompletionChannel.class));
		beans.registerSingleton("rx", rx);
		DefaultRdmaListenerContainerFactory factory = new DefaultRdmaListenerContainerFactory();
		factory.setBeanFactory(beans);
		factory.setPollerGroupSettings(PollerGroup.DEFAULT, PollerGroupSettings.DEFAULTS);
		factory.setPollerGroup("rx", PollerGroup.DEFAULT);
		return factory;
	}

	private static RdmaListenerEndpoint endpoint() throws Exception {
		return new RdmaListenerEndpoint("@RdmaCompletionListener L.on(WorkCompletion) of bean 'l'", "l",
				Object.class.getMethod("toString"), "rx", false, null, completion -> {
				});
	}

	@Test
	void setModeOrSpinOnAGroupQueueIsRefused() throws Exception {
		DefaultRdmaListenerContainerFactory factory = factory();
		factory.addContainerCustomizer(container -> {
			container.setSettings(container.getSettings().withMode(PollingMode.BUSY));
			container.setSettings(container.getSettings().withSpin(Duration.ofMillis(1)));
		});
		assertThatExceptionOfType(RdmaConfigurationException.class)
			.isThrownBy(() -> factory.createListenerContainer(endpoint()))
			.withMessageContaining(
					"a RdmaListenerContainerCustomizer set [mode BUSY, spin PT0.001S] in the settings of "
							+ "the container of queue 'rx', but the queue is polled by poller group 'default'")
			.satisfies(ex -> assertThat(ex.action()).contains("rdma.completion-queues.rx.poller=dedicated"));
	}

	@Test
	void otherSettingsAndLeavingTheGroupAreAccepted() throws Exception {
		DefaultRdmaListenerContainerFactory factory = factory();
		factory.addContainerCustomizer(container -> container.setSettings(container.getSettings().withBatchSize(128)));
		CompletionQueueListenerContainer grouped = factory.createListenerContainer(endpoint());
		assertThat(grouped.getSettings().batchSize()).isEqualTo(128);
		assertThat(grouped.getPollerGroup()).isNotNull();
		grouped.awaitStop(System.nanoTime());
		DefaultRdmaListenerContainerFactory dedicated = factory();
		dedicated.addContainerCustomizer(container -> {
			container.setPollerGroup(null);
			container.setSettings(container.getSettings().withMode(PollingMode.BUSY));
		});
		CompletionQueueListenerContainer own = dedicated.createListenerContainer(endpoint());
		assertThat(own.mode()).isEqualTo(PollingMode.BUSY);
		own.awaitStop(System.nanoTime());
	}

}
