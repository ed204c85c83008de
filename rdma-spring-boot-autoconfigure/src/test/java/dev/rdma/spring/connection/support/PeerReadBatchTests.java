package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.verbs.cm.CmParameters;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a {@link ReadBatch} refuses before anything reaches a connection, and that an
 * empty or cleared batch reads nothing (the READs themselves:
 * {@code RemoteAccessDeviceTest}).
 */
class PeerReadBatchTests {

	private final AtomicInteger resolved = new AtomicInteger();

	private final ReadBatch batch = new PeerReadBatch(() -> {
		resolved.incrementAndGet();
		throw new AssertionError("no connection is needed");
	}, new ConnectionSettings("orders", false, new InetSocketAddress("10.0.0.2", 7471), null, 1, Duration.ofSeconds(5),
			new ConnectionSettings.Retry(Duration.ofSeconds(1), 2, Duration.ofSeconds(10), 0), "tx", "rx", 4, 1, 1,
			1024, Duration.ofSeconds(1), true, CmParameters.DEFAULTS, Duration.ofSeconds(2), 0, null));

	@Test
	void refusesWhatCannotBeRead() {
		try (Arena arena = Arena.ofConfined()) {
			assertThatThrownBy(() -> batch.add(0, arena.allocate(16).asReadOnly()))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("writable");
			assertThatThrownBy(() -> batch.add(0, arena.allocate(1025))).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("1025 bytes")
				.hasMessageContaining("rdma.connections.orders.message-size (1024)");
			assertThatThrownBy(() -> batch.add(-1, arena.allocate(8))).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("offset -1");
			assertThat(batch.size()).isZero();
			for (int i = 0; i < 4; i++) {
				batch.add(i * 1024L, arena.allocate(1024));
			}
			assertThat(batch.size()).isEqualTo(4);
			assertThatThrownBy(() -> batch.add(0, arena.allocate(8))).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("at most send-depth (4)");
			batch.clear();
			assertThat(batch.size()).isZero();
			batch.read();
			assertThat(resolved).as("an empty batch reaches no connection").hasValue(0);
		}
	}

}
