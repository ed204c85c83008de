package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CqCreateFlag;
import dev.rdma.verbs.WcExFlag;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every property of {@link RdmaProperties} binds from the names of the issue's
 * application.yml.
 */
class RdmaPropertiesBindingTests {

	@Configuration(proxyBeanMethods = false)
	@EnableConfigurationProperties(RdmaProperties.class)
	static class Config {

	}

	private final ApplicationContextRunner runner = new ApplicationContextRunner().withUserConfiguration(Config.class);

	@Test
	void bindsEveryProperty() {
		runner.withPropertyValues("rdma.required=true", "rdma.shutdown-timeout=3s", "rdma.devices.nic0.name=mlx5_0",
				"rdma.devices.nic0.port=2", "rdma.devices.nic1.guid=0x505400fffe727865",
				"rdma.channels.events0.device=nic0", "rdma.channels.events0.non-blocking=true",
				"rdma.completion-queues.rx.device=nic0", "rdma.completion-queues.rx.type=extended",
				"rdma.completion-queues.rx.entries=4096", "rdma.completion-queues.rx.comp-vector=auto",
				"rdma.completion-queues.rx.channel=events0",
				"rdma.completion-queues.rx.wc-flags=byte-len,imm,qp-num,src-qp",
				"rdma.completion-queues.rx.flags=single-threaded,ignore-overrun",
				"rdma.completion-queues.rx.efa-wc-flags=sgid,unsolicited",
				"rdma.completion-queues.rx.polling.mode=adaptive", "rdma.completion-queues.rx.polling.batch-size=16",
				"rdma.completion-queues.rx.polling.spin=50us", "rdma.completion-queues.rx.ack-batch=128",
				"rdma.completion-queues.tx.device=nic0", "rdma.completion-queues.tx.type=legacy",
				"rdma.completion-queues.tx.entries=1024", "rdma.completion-queues.tx.comp-vector=3")
			.run(context -> {
				RdmaProperties p = context.getBean(RdmaProperties.class);
				assertThat(p.isRequired()).isTrue();
				assertThat(p.getShutdownTimeout()).isEqualTo(Duration.ofSeconds(3));
				assertThat(p.getDevices()).containsOnlyKeys("nic0", "nic1");
				assertThat(p.getDevices().get("nic0").getName()).isEqualTo("mlx5_0");
				assertThat(p.getDevices().get("nic0").getPort()).isEqualTo(2);
				assertThat(p.getDevices().get("nic1").getGuid()).isEqualTo("0x505400fffe727865");
				assertThat(RdmaPropertiesValidator.parseGuid("g", p.getDevices().get("nic1").getGuid()))
					.isEqualTo(0x505400fffe727865L);
				assertThat(p.getChannels().get("events0").getDevice()).isEqualTo("nic0");
				assertThat(p.getChannels().get("events0").isNonBlocking()).isTrue();
				CompletionQueueProperties rx = p.getCompletionQueues().get("rx");
				assertThat(rx.getDevice()).isEqualTo("nic0");
				assertThat(rx.getType()).isEqualTo(QueueType.EXTENDED);
				assertThat(rx.getEntries()).isEqualTo(4096);
				assertThat(rx.getCompVector()).isEqualTo("auto");
				assertThat(rx.getChannel()).isEqualTo("events0");
				assertThat(rx.getWcFlags()).containsExactly(WcExFlag.BYTE_LEN, WcExFlag.IMM, WcExFlag.QP_NUM,
						WcExFlag.SRC_QP);
				assertThat(rx.getFlags()).containsExactly(CqCreateFlag.SINGLE_THREADED, CqCreateFlag.IGNORE_OVERRUN);
				assertThat(rx.getEfaWcFlags()).containsExactly(EfaWcField.SGID, EfaWcField.UNSOLICITED);
				assertThat(rx.getPolling().getMode()).isEqualTo(PollingMode.ADAPTIVE);
				assertThat(rx.getPolling().getBatchSize()).isEqualTo(16);
				assertThat(rx.getPolling().getSpin()).isEqualTo(Duration.ofNanos(50_000));
				assertThat(rx.getAckBatch()).isEqualTo(128);
				CompletionQueueProperties tx = p.getCompletionQueues().get("tx");
				assertThat(tx.getType()).isEqualTo(QueueType.LEGACY);
				assertThat(tx.getEntries()).isEqualTo(1024);
				assertThat(RdmaPropertiesValidator.compVector("p", tx)).isEqualTo(3);
				assertThat(RdmaPropertiesValidator.compVector("p", rx)).isEqualTo(-1);
				assertThat(p.getCompletionQueues().keySet()).containsExactly("rx", "tx");
			});
	}

	@Test
	void defaults() {
		runner.withPropertyValues("rdma.completion-queues.q.device=d").run(context -> {
			RdmaProperties p = context.getBean(RdmaProperties.class);
			assertThat(p.isRequired()).isFalse();
			assertThat(p.getShutdownTimeout()).isEqualTo(Duration.ofSeconds(5));
			CompletionQueueProperties q = p.getCompletionQueues().get("q");
			assertThat(q.getType()).isEqualTo(QueueType.LEGACY);
			assertThat(q.getEntries()).isEqualTo(1024);
			assertThat(q.getCompVector()).isEqualTo("auto");
			assertThat(q.getChannel()).isNull();
			assertThat(q.getWcFlags()).isEmpty();
			assertThat(q.getPolling().getMode()).isNull();
			// no channel: backoff, never busy unless asked for
			assertThat(RdmaPropertiesValidator.effectiveMode(q)).isEqualTo(PollingMode.BACKOFF);
			assertThat(q.getPolling().getMaxSleep()).isEqualTo(Duration.ofMillis(1));
			q.setChannel("c");
			assertThat(RdmaPropertiesValidator.effectiveMode(q)).isEqualTo(PollingMode.EVENT);
			assertThat(q.getPolling().getBatchSize()).isEqualTo(32);
			assertThat(q.getPolling().getSpin()).isEqualTo(Duration.ofNanos(50_000));
			assertThat(q.getAckBatch()).isEqualTo(64);
			assertThat(RdmaResources.providedWcFlags(q)).isEqualTo(WcExFlag.STANDARD);
		});
	}

	@Test
	void yamlStyleListsAndGuidWithColons() {
		runner
			.withPropertyValues("rdma.completion-queues.rx.wc-flags[0]=byte-len",
					"rdma.completion-queues.rx.wc-flags[1]=completion-timestamp", "rdma.completion-queues.rx.type=EFA")
			.run(context -> {
				CompletionQueueProperties rx = context.getBean(RdmaProperties.class).getCompletionQueues().get("rx");
				assertThat(rx.getWcFlags()).containsExactly(WcExFlag.BYTE_LEN, WcExFlag.COMPLETION_TIMESTAMP);
				assertThat(rx.getType()).isEqualTo(QueueType.EFA);
				assertThat(RdmaResources.providedWcFlags(rx))
					.isEqualTo(WcExFlag.BYTE_LEN.bit() | WcExFlag.COMPLETION_TIMESTAMP.bit());
			});
		assertThat(RdmaPropertiesValidator.parseGuid("g", "5054:00ff:fe72:7865")).isEqualTo(0x505400fffe727865L);
	}

}
