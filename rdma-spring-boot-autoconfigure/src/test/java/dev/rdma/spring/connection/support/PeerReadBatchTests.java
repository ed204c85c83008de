package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

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

	/** A client connection 'orders': send-depth 4, message-size 1024. */
	static final ConnectionSettings ORDERS = new ConnectionSettings("orders", false,
			new InetSocketAddress("10.0.0.2", 7471), null, 1, Duration.ofSeconds(5),
			new ConnectionSettings.Retry(Duration.ofSeconds(1), 2, Duration.ofSeconds(10), 0), "tx", "rx", 4, 1, 1,
			1024, Duration.ofSeconds(1), true, CmParameters.DEFAULTS, Duration.ofSeconds(2), 0, null);

	private final ReadBatch batch = new PeerReadBatch(() -> {
		resolved.incrementAndGet();
		throw new AssertionError("no connection is needed");
	}, ORDERS);

	/**
	 * {@code read} (a batch's add, a stream's submit) refuses a read-only target and one
	 * longer than ORDERS' message-size, naming {@code where}.
	 */
	static void refusesReadOnlyAndOversizedTargets(Arena arena, Consumer<MemorySegment> read, String where) {
		assertThatThrownBy(() -> read.accept(arena.allocate(16).asReadOnly()))
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("writable");
		assertThatThrownBy(() -> read.accept(arena.allocate(1025))).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("1025 bytes " + where)
			.hasMessageContaining("rdma.connections.orders.message-size (1024)");
	}

	@Test
	void refusesWhatCannotBeRead() {
		try (Arena arena = Arena.ofConfined()) {
			refusesReadOnlyAndOversizedTargets(arena, target -> batch.add(0, target), "in a batch");
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
