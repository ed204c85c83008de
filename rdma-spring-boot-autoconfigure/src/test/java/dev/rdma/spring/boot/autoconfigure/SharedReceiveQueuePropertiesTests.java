package dev.rdma.spring.boot.autoconfigure;

import java.util.LinkedHashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.support.ConnectionSettings;
import dev.rdma.verbs.LockedMemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatNoException;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * {@code rdma.connections.<name>.shared-receive-queue}: binding and defaults, the
 * settings it becomes, the errors naming its properties (a client, a depth or limit out
 * of range), the receive queue's load (the SRQ's depth instead of max-peers ×
 * receive-depth), and {@link PinnedMemory}: the SRQ counted once, the per-peer receive
 * buffers dropped.
 */
class SharedReceiveQueuePropertiesTests {

	private static final String C = "rdma.connections.orders.";

	/**
	 * A server {@code orders} with 64 peers of 64 receive buffers of 4 KiB, queues tx and
	 * rx (rx: {@code rxEntries}), and {@code more} (key=value, relative to the
	 * connection).
	 */
	static RdmaProperties server(int rxEntries, String... more) {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.devices.nic0.name", "rxe0");
		values.put("rdma.completion-queues.tx.entries", "8192");
		values.put("rdma.completion-queues.rx.entries", String.valueOf(rxEntries));
		values.put(C + "listen", "10.0.0.2:7471");
		values.put(C + "send-queue", "tx");
		values.put(C + "receive-queue", "rx");
		values.put(C + "max-peers", "64");
		for (String property : more) {
			int eq = property.indexOf('=');
			values.put(C + property.substring(0, eq), property.substring(eq + 1));
		}
		return new Binder(new MapConfigurationPropertySource(values)).bind("rdma", RdmaProperties.class).get();
	}

	private static RdmaConfigurationException failure(RdmaProperties properties) {
		return catchThrowableOfType(RdmaConfigurationException.class,
				() -> RdmaConnectionProperties.validate(properties));
	}

	@Test
	void offByDefaultWithDepth512AndAQuarterAsLimit() {
		RdmaProperties properties = server(8192);
		SharedReceiveQueueProperties srq = properties.getConnections().get("orders").getSharedReceiveQueue();
		assertThat(srq.isEnabled()).isFalse();
		assertThat(srq.getDepth()).isEqualTo(512);
		assertThat(srq.getLimit()).isNull();
		assertThat(srq.effectiveLimit()).isEqualTo(128);
		RdmaConnectionProperties.validate(properties);
		assertThat(RdmaConnectionProperties.settings(properties).get(0).sharedReceive()).isNull();
	}

	@Test
	void enabledBecomesTheSettingsSharedReceive() {
		RdmaProperties properties = server(8192, "shared-receive-queue.enabled=true", "shared-receive-queue.depth=256",
				"shared-receive-queue.limit=32");
		RdmaConnectionProperties.validate(properties);
		ConnectionSettings settings = RdmaConnectionProperties.settings(properties).get(0);
		assertThat(settings.sharedReceive()).isEqualTo(new ConnectionSettings.SharedReceive(256, 32));
		properties = server(8192, "shared-receive-queue.enabled=true", "shared-receive-queue.depth=100");
		assertThat(RdmaConnectionProperties.settings(properties).get(0).sharedReceive())
			.isEqualTo(new ConnectionSettings.SharedReceive(100, 25));
		properties = server(8192, "shared-receive-queue.enabled=true", "shared-receive-queue.limit=0");
		assertThat(RdmaConnectionProperties.settings(properties).get(0).sharedReceive().limit()).as("no limit")
			.isZero();
	}

	@Test
	void aClientRefusesIt() {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.devices.nic0.name", "rxe0");
		values.put("rdma.completion-queues.tx.entries", "256");
		values.put(C + "connect", "10.0.0.2:7471");
		values.put(C + "send-queue", "tx");
		values.put(C + "receive-queue", "tx");
		values.put(C + "shared-receive-queue.enabled", "true");
		RdmaProperties properties = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		RdmaConfigurationException ex = failure(properties);
		assertThat(ex.property()).isEqualTo(C + "shared-receive-queue.enabled");
		assertThat(ex.getMessage()).contains("is for a server");
		// disabled, its depth on a client is ignored
		values.put(C + "shared-receive-queue.enabled", "false");
		values.put(C + "shared-receive-queue.depth", "0");
		RdmaProperties disabled = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		assertThatNoException().isThrownBy(() -> RdmaConnectionProperties.validate(disabled));
	}

	@Test
	void depthAndLimitOutOfRangeFailNamingTheirProperty() {
		RdmaConfigurationException depth = failure(
				server(8192, "shared-receive-queue.enabled=true", "shared-receive-queue.depth=0"));
		assertThat(depth.property()).isEqualTo(C + "shared-receive-queue.depth");
		assertThat(depth.getMessage()).contains("shared-receive-queue.depth=0 must be between 1 and");
		RdmaConfigurationException limit = failure(server(8192, "shared-receive-queue.enabled=true",
				"shared-receive-queue.depth=64", "shared-receive-queue.limit=64"));
		assertThat(limit.property()).isEqualTo(C + "shared-receive-queue.limit");
		assertThat(limit.getMessage()).contains("limit=64 must be between 0 and 63");
		RdmaConfigurationException bytes = failure(server(8192, "shared-receive-queue.enabled=true",
				"shared-receive-queue.depth=1048576", "message-size=65536"));
		assertThat(bytes.property()).isEqualTo(C + "message-size");
		assertThat(bytes.getMessage()).contains("shared-receive-queue.depth=1048576");
	}

	@Test
	void theReceiveQueueHoldsTheDepthNotMaxPeersTimesReceiveDepth() {
		// 64 peers x receive-depth 64 = 4096 receives in flight: more than 1024 entries
		RdmaConfigurationException ex = failure(server(1024));
		assertThat(ex.property()).isEqualTo("rdma.completion-queues.rx.entries");
		assertThat(ex.getMessage()).contains("4096");
		// on the SRQ: its 512 receives, for all peers
		assertThatNoException()
			.isThrownBy(() -> RdmaConnectionProperties.validate(server(1024, "shared-receive-queue.enabled=true")));
	}

	@Test
	void pinnedMemoryCountsTheQueueOnceAndNoReceiveBuffersPerPeer() {
		PinnedMemory without = PinnedMemory.of(server(8192));
		PinnedMemory with = PinnedMemory.of(server(8192, "shared-receive-queue.enabled=true"));
		// per peer without: 64 send + 64 receive buffers of 4 KiB (512 KiB), rings
		// 64*64 + 64*16 = 5120 B -> 8 KiB
		PinnedMemory.Part peer = without.parts().get(0);
		assertThat(peer.each()).isEqualTo((512L << 10) + 8192);
		assertThat(peer.count()).isEqualTo(64);
		// per peer with: 64 send buffers (256 KiB) and the send ring (4 KiB)
		PinnedMemory.Part sharedPeer = with.parts().get(0);
		assertThat(sharedPeer.each()).isEqualTo((256L << 10) + 4096);
		assertThat(sharedPeer.count()).isEqualTo(64);
		assertThat(sharedPeer.detail()).contains("64 send and 0 receive buffers (shared receive queue) of 4 KiB");
		// the SRQ once: 512 buffers of 4 KiB (2 MiB) and a ring of 512*16 = 8 KiB
		PinnedMemory.Part srq = with.parts().get(1);
		assertThat(srq.kind()).isEqualTo("shared-receive-queue");
		assertThat(srq.count()).isEqualTo(1);
		assertThat(srq.bytes()).isEqualTo((2L << 20) + 8192);
		assertThat(srq.property()).isEqualTo(C + "shared-receive-queue.depth");
		assertThat(srq.describe()).isEqualTo("shared-receive-queue 'orders': 512 receive buffers of 4 KiB (2 MiB) "
				+ "for all 64 peers, ring 8 KiB (estimate) = 2056 KiB");
		assertThat(with.bytesOf("shared-receive-queue")).containsEntry("orders", (2L << 20) + 8192);
		long receivesWithout = 64 * ((256L << 10) + 4096);
		assertThat(without.total() - with.total()).as("the per-peer receive part, less the SRQ")
			.isEqualTo(receivesWithout - srq.bytes());
		assertThat(with.lines(LockedMemory.Limit.UNLIMITED)).anyMatch(l -> l.contains("shared-receive-queue"));
	}

}
