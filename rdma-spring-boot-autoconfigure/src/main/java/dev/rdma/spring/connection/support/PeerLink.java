package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.time.Duration;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.cm.ConnectionId;

/**
 * What connects a {@link PeerConnection}'s queue pair to its peer besides the QP itself,
 * and what {@link PeerConnection#close} tells the peer through: an rdma_cm id
 * ({@link Cm}), or the TCP connection kept open after an out-of-band exchange
 * ({@link OutOfBandLink}).
 */
sealed interface PeerLink extends AutoCloseable permits PeerLink.Cm, OutOfBandLink {

	/**
	 * The orderly disconnect: tells the peer this side closes, and waits (up to
	 * {@code timeout}) for its answer.
	 */
	void disconnect(Duration timeout);

	/** The peer's address, or null once closed. */
	@Nullable InetSocketAddress peerAddress();

	/** This side's address, or null once closed. */
	@Nullable InetSocketAddress localAddress();

	/** Releases the link (idempotent, never throws). */
	@Override
	void close();

	/** An rdma_cm id: {@code rdma_disconnect}, {@code rdma_destroy_id}. */
	record Cm(ConnectionId id) implements PeerLink {

		@Override
		public void disconnect(Duration timeout) {
			id.disconnect(timeout);
		}

		@Override
		public @Nullable InetSocketAddress peerAddress() {
			return id.isClosed() ? null : id.peerAddress();
		}

		@Override
		public @Nullable InetSocketAddress localAddress() {
			return id.isClosed() ? null : id.localAddress();
		}

		@Override
		public void close() {
			id.close();
		}

	}

}
