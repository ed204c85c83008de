package dev.rdma.spring.connection.event;

import java.io.Serial;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * A server did not take a peer that asked to connect: {@code max-peers} were connected
 * (rdma_cm: rejected with {@code rdma_reject}), or accepting it failed. Published by the
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
		ACCEPT_FAILED

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
