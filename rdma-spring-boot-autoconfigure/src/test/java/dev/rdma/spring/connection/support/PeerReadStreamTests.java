package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.ReadStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a {@link ReadStream} refuses before anything reaches a connection, and that an
 * empty stream flushes and closes without one (the READs themselves:
 * {@code RemoteAccessDeviceTest}).
 */
class PeerReadStreamTests {

	private final AtomicInteger resolved = new AtomicInteger();

	private final ConnectionSettings settings = PeerReadBatchTests.ORDERS;

	private final ReadStream stream = new PeerReadStream(() -> {
		resolved.incrementAndGet();
		throw new AssertionError("no connection is needed");
	}, settings, 4);

	@Test
	void refusesWhatCannotBeReadBeforeReachingAConnection() {
		try (Arena arena = Arena.ofConfined()) {
			PeerReadBatchTests.refusesReadOnlyAndOversizedTargets(arena, target -> stream.submit(0, target),
					"in a stream");
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
