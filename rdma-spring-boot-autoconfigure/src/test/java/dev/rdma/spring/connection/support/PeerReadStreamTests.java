package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.ReadStream;
import dev.rdma.verbs.cm.CmParameters;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a {@link ReadStream} refuses before anything reaches a connection, and that an
 * empty stream flushes and closes without one (the READs themselves:
 * {@code RemoteAccessDeviceTest}).
 */
class PeerReadStreamTests {

	private final AtomicInteger resolved = new AtomicInteger();

	private final ConnectionSettings settings = new ConnectionSettings("orders", false,
			new InetSocketAddress("10.0.0.2", 7471), null, 1, Duration.ofSeconds(5),
			new ConnectionSettings.Retry(Duration.ofSeconds(1), 2, Duration.ofSeconds(10), 0), "tx", "rx", 4, 1, 1,
			1024, Duration.ofSeconds(1), true, CmParameters.DEFAULTS, Duration.ofSeconds(2), 0, null);

	private final ReadStream stream = new PeerReadStream(() -> {
		resolved.incrementAndGet();
		throw new AssertionError("no connection is needed");
	}, settings, 4);

	@Test
	void refusesWhatCannotBeReadBeforeReachingAConnection() {
		try (Arena arena = Arena.ofConfined()) {
			assertThatThrownBy(() -> stream.submit(0, arena.allocate(16).asReadOnly()))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("writable");
			assertThatThrownBy(() -> stream.submit(0, arena.allocate(1025)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("1025 bytes")
				.hasMessageContaining("rdma.connections.orders.message-size (1024)");
		}
		assertThat(stream.window()).isEqualTo(4);
		assertThat(stream.inFlight()).isZero();
		assertThat(stream.flush()).isZero();
		stream.close();
		stream.close();
		assertThat(resolved).as("an empty stream reaches no connection").hasValue(0);
	}

	@Test
	void theWindowIsOneToSendDepth() {
		for (int window : new int[] { 0, -1, 5 }) {
			assertThatThrownBy(() -> new PeerReadStream(() -> {
				throw new AssertionError();
			}, settings, window)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("connection 'orders'")
				.hasMessageContaining("1 to send-depth (4), not " + window);
		}
		assertThat(new PeerReadStream(() -> {
			throw new AssertionError();
		}, settings, 1).window()).isEqualTo(1);
	}

}
