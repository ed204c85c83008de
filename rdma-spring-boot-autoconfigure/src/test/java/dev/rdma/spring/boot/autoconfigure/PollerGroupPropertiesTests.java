package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.DefaultRdmaListenerContainerFactory;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollerMetrics;
import dev.rdma.spring.listener.PollingMode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code rdma.pollers.*} and {@code rdma.completion-queues.
 *
<q>.poller}: binding, which poller a queue gets, and the errors naming the property;
 * nothing native is touched.
 */
class PollerGroupPropertiesTests {

	@Configuration(proxyBeanMethods = false)
	@EnableConfigurationProperties(RdmaProperties.class)
	static class Config {

	}

	private final ApplicationContextRunner runner = new ApplicationContextRunner().withUserConfiguration(Config.class)
		.withPropertyValues("rdma.devices.nic0.name=rxe0", "rdma.channels.events0.device=nic0");

	@Test
	void bindsThePollerGroupsAndTheQueuesPoller() {
		runner
			.withPropertyValues("rdma.pollers.conns.threads=4", "rdma.pollers.conns.mode=adaptive",
					"rdma.pollers.conns.spin=20us", "rdma.pollers.conns.batch-budget=64",
					"rdma.completion-queues.rx.channel=events0", "rdma.completion-queues.rx.poller=conns")
			.run(context -> {
				RdmaProperties p = context.getBean(RdmaProperties.class);
				PollerProperties conns = p.getPollers().get("conns");
				assertThat(conns.getThreads()).isEqualTo(4);
				assertThat(conns.getMode()).isEqualTo(PollingMode.ADAPTIVE);
				assertThat(conns.getSpin()).isEqualTo(Duration.ofNanos(20_000));
				assertThat(conns.getBatchBudget()).isEqualTo(64);
				assertThat(p.getCompletionQueues().get("rx").getPoller()).isEqualTo("conns");
				RdmaPropertiesValidator.validate(p, name -> false);
			});
	}

	@Test
	void defaultsOfAGroup() {
		PollerProperties group = new PollerProperties();
		assertThat(group.getThreads()).isEqualTo(1);
		assertThat(group.getMode()).isEqualTo(PollingMode.EVENT);
		assertThat(group.getBatchBudget()).isEqualTo(256);
		assertThat(group.getSpin()).isEqualTo(Duration.ofNanos(50_000));
	}

	@Test
	void aQueueWithAChannelAndNoModeOfItsOwnGoesToTheDefaultGroupAnyOtherToADedicatedThread() {
		CompletionQueueProperties q = new CompletionQueueProperties();
		assertThat(RdmaPropertiesValidator.effectivePoller(q)).as("no channel: busy only, dedicated").isNull();
		q.setChannel("events0");
		assertThat(RdmaPropertiesValidator.effectivePoller(q)).isEqualTo(PollerGroup.DEFAULT);
		q.getPolling().setMode(PollingMode.ADAPTIVE);
		assertThat(RdmaPropertiesValidator.effectivePoller(q)).as("a mode of its own: dedicated").isNull();
		q.getPolling().setMode(null);
		q.setPoller("dedicated");
		assertThat(RdmaPropertiesValidator.effectivePoller(q)).isNull();
		q.setPoller(" conns ");
		assertThat(RdmaPropertiesValidator.effectivePoller(q)).isEqualTo("conns");
	}

	@Test
	void theConfigurerPutsEachQueueInItsGroup() {
		runner
			.withPropertyValues("rdma.pollers.conns.threads=2", "rdma.completion-queues.a.channel=events0",
					"rdma.completion-queues.a.poller=conns", "rdma.completion-queues.b.channel=events0",
					"rdma.completion-queues.c.channel=events0", "rdma.completion-queues.c.poller=dedicated",
					"rdma.completion-queues.d.entries=8")
			.run(context -> {
				RdmaProperties p = context.getBean(RdmaProperties.class);
				DefaultRdmaListenerContainerFactory factory = new DefaultRdmaListenerContainerFactory();
				new RdmaListenerContainerFactoryConfigurer(p, PollerMetrics.Factory.NONE, java.util.List.of())
					.configure(factory);
				PollerGroup a = factory.getPollerGroup("a");
				assertThat(a).isNotNull();
				assertThat(a.name()).isEqualTo("conns");
				assertThat(a.settings().threads()).isEqualTo(2);
				PollerGroup b = factory.getPollerGroup("b");
				assertThat(b).isNotNull();
				assertThat(b.name()).isEqualTo(PollerGroup.DEFAULT);
				assertThat(b.settings().threads()).isEqualTo(1);
				assertThat(b.settings().mode()).isEqualTo(PollingMode.EVENT);
				assertThat(factory.getPollerGroup("c")).isNull();
				assertThat(factory.getPollerGroup("d")).isNull();
				// one group object per name
				assertThat(factory.getPollerGroup("a")).isSameAs(a);
				assertThat(a.threads()).as("threads start with their first queue").isEmpty();
			});
	}

	static Stream<Arguments> badInputs() {
		return Stream.of(bad("rdma.pollers.conns.threads=0 must be between 1 and 1024", "rdma.pollers.conns.threads=0"),
				bad("rdma.pollers.conns.batch-budget=0 must be at least 1", "rdma.pollers.conns.batch-budget=0"),
				bad("rdma.pollers.conns.spin=PT-0.001S must not be negative", "rdma.pollers.conns.spin=-1ms"),
				bad("rdma.pollers.conns.spin=PT4800000H is longer than 24h", "rdma.pollers.conns.spin=200000d"),
				bad("rdma.pollers.dedicated: 'dedicated' is not a group name", "rdma.pollers.dedicated.threads=2"),
				bad("rdma.pollers.conns.mode=backoff is the mode of a dedicated poller",
						"rdma.pollers.conns.mode=backoff"),
				bad("rdma.completion-queues.rx.poller=conns names no poller group under rdma.pollers (configured: [])",
						"rdma.completion-queues.rx.channel=events0", "rdma.completion-queues.rx.poller=conns"),
				bad("rdma.completion-queues.rx.poller must not be blank", "rdma.completion-queues.rx.channel=events0",
						"rdma.completion-queues.rx.poller= "),
				bad("rdma.completion-queues.rx.polling.mode=busy is the mode of a dedicated poller, but the queue is"
						+ " polled by poller group 'conns' (whose mode is rdma.pollers.conns.mode)",
						"rdma.pollers.conns.threads=2", "rdma.completion-queues.rx.channel=events0",
						"rdma.completion-queues.rx.poller=conns", "rdma.completion-queues.rx.polling.mode=busy"),
				bad("rdma.completion-queues.rx is polled by poller group 'default' in event mode, which waits on"
						+ " completion channels, but rdma.completion-queues.rx.channel is not set",
						"rdma.completion-queues.rx.poller=default"),
				bad("rdma.completion-queues.rx is polled by poller group 'conns' in adaptive mode",
						"rdma.pollers.conns.mode=adaptive", "rdma.completion-queues.rx.poller=conns"));
	}

	private static Arguments bad(String message, String... properties) {
		return Arguments.of(message, properties);
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("badInputs")
	void badInputNamesTheProperty(String message, String[] properties) {
		runner.withPropertyValues(properties).run(context -> {
			RdmaProperties p = context.getBean(RdmaProperties.class);
			assertThatThrownBy(() -> RdmaPropertiesValidator.validate(p, name -> false))
				.isInstanceOf(RdmaConfigurationException.class)
				.hasMessageContaining(message);
		});
	}

	@Test
	void aBusyGroupTakesQueuesWithoutChannel() {
		runner.withPropertyValues("rdma.pollers.spin.mode=busy", "rdma.completion-queues.rx.poller=spin")
			.run(context -> RdmaPropertiesValidator.validate(context.getBean(RdmaProperties.class), name -> false));
	}

}
