package dev.rdma.spring.connection.support;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.verbs.cm.ConnectionId;

/**
 * A peer connection in the making, by a client's attempt or a server's accept: what
 * {@link #close} releases when it fails, the {@link PeerConnection} once made (which owns
 * the link from then on), or else the link or request that came before it.
 */
abstract class PendingPeer {

	final ConfiguredConnection connection;

	final ConnectionSettings settings;

	private @Nullable PeerConnection peer;

	PendingPeer(ConfiguredConnection connection) {
		this.connection = connection;
		this.settings = connection.settings;
	}

	/** A new peer connection for the rdma_cm {@code id} ({@link #close} closes it). */
	final PeerConnection newPeer(ConnectionId id) {
		return made(connection.newPeer(id));
	}

	/** A new peer connection through {@code link} ({@link #close} closes it). */
	final PeerConnection newPeer(PeerLink link) {
		return made(connection.newPeer(link));
	}

	private PeerConnection made(PeerConnection peer) {
		this.peer = peer;
		return peer;
	}

	/** The peer connection made, or null before. */
	final @Nullable PeerConnection peer() {
		return peer;
	}

	/**
	 * Releases what a failed attempt or accept made: its peer connection (closed as
	 * DISCONNECTED within {@code close-timeout}), or what came before it.
	 */
	public final void close() {
		PeerConnection p = peer;
		if (p != null) {
			p.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
		}
		else {
			release();
		}
	}

	/** Releases the link or request when no peer connection was made (idempotent). */
	abstract void release();

}
