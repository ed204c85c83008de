package dev.rdma.spring.connection.support;

import org.jspecify.annotations.Nullable;

/**
 * How a {@link ClientConnection} reaches its server, one {@link Attempt} at a time:
 * through rdma_cm ({@link RdmaCmClientTransport}) or the TCP exchange of
 * {@code exchange: out-of-band} ({@link OutOfBandClientTransport}). The connection runs
 * the attempts, the back-off between them and the bookkeeping of its current peer; a
 * transport connects one queue pair and tells when its connection ended. Not sealed: the
 * host tests of the connection's loop give it a transport of their own.
 */
interface ClientTransport {

	/** The transport that {@code settings} ask for. */
	static ClientTransport of(ConnectionSettings settings) {
		ConnectionSettings.OutOfBandOptions outOfBand = settings.outOfBand();
		return (outOfBand != null) ? new OutOfBandClientTransport(outOfBand) : new RdmaCmClientTransport();
	}

	/**
	 * Creates what the attempts of {@code connection} share: its protection domain, and
	 * for rdma_cm its event channel.
	 */
	void open(ConfiguredConnection connection);

	/** A new attempt, or null when {@code connection} can make none any more. */
	@Nullable Attempt newAttempt(ClientConnection connection);

	/**
	 * One attempt to connect, then the wait for the end of the connection it made. Its
	 * {@link #wakeUp} is called by another thread (stopping).
	 */
	interface Attempt {

		/**
		 * Connects a new {@link PeerConnection} to the server by {@code deadline}
		 * ({@link System#nanoTime()}), its QP ready to send.
		 * @throws RuntimeException when the attempt failed ({@link #close} releases what
		 * it made)
		 */
		PeerConnection connect(long deadline);

		/**
		 * Waits for the end of the connection: how it ended (also by a failed completion
		 * of its QP, {@link PeerConnection#failure()}, which {@link #wakeUp}s this wait),
		 * or null when stopping.
		 */
		@Nullable End awaitEnd();

		/** Answers the peer's end before the peer connection is closed. */
		void acknowledgeEnd();

		/** Ends a wait of {@link #connect} or {@link #awaitEnd} at once. */
		void wakeUp();

		/**
		 * Releases what a failed attempt made: its peer connection, or its id or link
		 * alone (idempotent).
		 */
		void close();

	}

	/**
	 * How an established connection ended.
	 *
	 * @param kind the connection error it counts as
	 * @param description what the log says
	 */
	record End(String kind, String description) {

		/**
		 * The end of {@code peer} by a failed completion, or null while none ended it.
		 */
		static @Nullable End failureOf(@Nullable PeerConnection peer) {
			String status = (peer != null) ? peer.failure() : null;
			return (status != null) ? new End(status, "a work request completed with " + status) : null;
		}

	}

}
