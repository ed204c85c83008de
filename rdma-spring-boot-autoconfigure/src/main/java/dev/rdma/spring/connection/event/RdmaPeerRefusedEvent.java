package dev.rdma.spring.connection.event;

import java.io.Serial;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * A server did not take a peer that asked to connect: {@code max-peers} were connected
 * (rdma_cm: rejected with {@code rdma_reject}), its address is not allowed, a filter
 * refused it, its private data is malformed, or accepting it failed. Published by the
 * server's {@code rdma-accept-<name>} thread, which accepts the next peer once listeners
 * return.
 */
public class RdmaPeerRefusedEvent extends RdmaConnectionEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	/** Why a peer was refused. */
	public enum Reason {

		/** {@code max-peers} peers were connected. */
		MAX_PEERS,

		/** Accepting failed (a verb, a timeout, the peer went away); see the detail. */
		ACCEPT_FAILED,

		/**
		 * The peer's address is not in the connection's {@code allowed-peers} (rejected
		 * before anything was made for it).
		 */
		NOT_ALLOWED,

		/**
		 * An {@link dev.rdma.spring.connection.RdmaConnectionFilter} bean refused the
		 * peer; the detail names it and its reason.
		 */
		FILTERED,

		/**
		 * The peer's connect request carried malformed private data (a region record of
		 * another version, a length out of range, an overflowing end).
		 */
		MALFORMED

	}

	private final String peer;

	private final Reason reason;

	private final String detail;

	/**
	 * {@code connection} refused {@code peer} (its address as text) for {@code reason}.
	 */
	public RdmaPeerRefusedEvent(RdmaConnection connection, String peer, Reason reason, String detail) {
		super(connection);
		this.peer = peer;
		this.reason = reason;
		this.detail = detail;
	}

	/** The peer's address as the log writes it. */
	public String getPeer() {
		return peer;
	}

	/** Why it was refused. */
	public Reason getReason() {
		return reason;
	}

	/** What the log says about it (the limit, or the accept's error). */
	public String getDetail() {
		return detail;
	}

	@Override
	String describe() {
		return ", " + peer + ", " + reason;
	}

}
