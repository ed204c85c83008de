package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;

import org.jspecify.annotations.Nullable;

/**
 * How a {@link ServerConnection} listens for its peers and notices their end: through
 * rdma_cm ({@link RdmaCmServerTransport}) or the TCP exchange of
 * {@code exchange: out-of-band} ({@link OutOfBandServerTransport}). The connection keeps
 * the peers, enforces {@code max-peers}, and closes a peer whose link ended; a transport
 * turns each connection request into a {@link Request} and tells whether a peer's link
 * ended.
 */
sealed interface ServerTransport permits RdmaCmServerTransport, OutOfBandServerTransport {

	/** The transport that {@code settings} ask for. */
	static ServerTransport of(ConnectionSettings settings) {
		ConnectionSettings.OutOfBandOptions outOfBand = settings.outOfBand();
		return (outOfBand != null) ? new OutOfBandServerTransport(outOfBand) : new RdmaCmServerTransport();
	}

	/**
	 * Creates what the peers of {@code server} share, binds and listens on its address.
	 * @throws dev.rdma.spring.RdmaConfigurationException when the address cannot be
	 * listened on (what was created is closed again)
	 */
	void listen(ServerConnection server);

	/** What follows "listening" in the log line of a started {@code server}. */
	String describeListening(ServerConnection server);

	/**
	 * Waits up to 100 ms for connection requests and hands each to
	 * {@link ServerConnection#accept}.
	 * @return false when the listener was closed (the thread ends)
	 */
	boolean awaitRequests(ServerConnection server);

	/** Ends a wait of {@link #awaitRequests} (and an exchange in progress) at once. */
	void wakeUp();

	/**
	 * A peer ended by a failed completion ({@link PeerConnection#failure()}): ends a wait
	 * of {@link #awaitRequests} (not an accept in progress) so that the thread closes the
	 * peer now. Called on a poller thread: never blocks for long, never throws.
	 */
	void peerEnded();

	/**
	 * How the link of an accepted {@code peer} ended (its error kind), null while it
	 * lives.
	 */
	@Nullable String endOf(PeerConnection peer);

	/** Answers the end of {@code peer}'s link before the peer connection is closed. */
	void acknowledgeEnd(PeerConnection peer);

	/** A peer as the log names it. */
	String describe(PeerConnection peer);

	/**
	 * Peers accepted and not yet connected, which count against {@code max-peers} (an
	 * rdma_cm accept waiting for ESTABLISHED); none by default.
	 */
	default int pendingPeers() {
		return 0;
	}

	/** Closes the listener (stopping, after the peers), and drops every pending peer. */
	void close();

	/** The RDMA device of the listener, or null when not listening. */
	@Nullable String deviceName(ServerConnection server);

	/** A peer asking to connect. */
	interface Request {

		/** Who asks, as the log names it. */
		String from();

		/** What the log says when {@code max-peers} turn it away. */
		String refusal();

		/** Turns it away: {@code max-peers} are connected. */
		void turnAway();

		/**
		 * The peer's address, null when unknown (rdma_cm: its RDMA address; out of band:
		 * that of its TCP connection).
		 */
		@Nullable InetSocketAddress peerAddress();

		/**
		 * The private data of its connect request (rdma_cm, at most 56 bytes), empty out
		 * of band; read-only.
		 */
		byte[] privateData();

		/**
		 * Refuses it before anything is made for it: rdma_cm rejects it with
		 * {@code rejectData} as the reject's private data; out of band its TCP connection
		 * is closed before any record is sent.
		 */
		void refuse(byte[] rejectData);

		/**
		 * Whether the server's admission already let it through (the out-of-band
		 * transport checks a TCP connection's address when it arrives, before it reads
		 * its record).
		 */
		default boolean admitted() {
			return false;
		}

		/**
		 * A new {@link PeerConnection} connected to the peer by {@code deadline}
		 * ({@link System#nanoTime()}), or null when the accept goes on without blocking
		 * (rdma_cm: until ESTABLISHED): the transport then hands the peer to
		 * {@link ServerConnection#established} or the failure to
		 * {@link ServerConnection#acceptFailed} by {@code deadline}, counting it in
		 * {@link ServerTransport#pendingPeers} meanwhile.
		 * @throws RuntimeException when accepting failed ({@link #close} releases what it
		 * made)
		 */
		@Nullable PeerConnection accept(long deadline);

		/** Releases what a failed accept made: its peer connection, or the request. */
		void close();

	}

}
