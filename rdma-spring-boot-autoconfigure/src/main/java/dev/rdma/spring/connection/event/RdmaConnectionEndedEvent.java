package dev.rdma.spring.connection.event;

import java.io.Serial;
import java.net.InetSocketAddress;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * An established connection to a peer ended and is closed: its queue pair destroyed, its
 * send and receive buffers returned (every listener call for it has returned), and, for a
 * server, the peer is no longer in {@code peers()}. Published by the client's
 * {@code rdma-connect-<name>} thread (before its back-off and reconnect, unless the
 * application disconnected it) or the server's {@code rdma-accept-<name>} thread. A stop
 * of the connections (the application context closing, or the connection registry's
 * {@code stop()}) publishes none: the application stopped them itself.
 */
public class RdmaConnectionEndedEvent extends RdmaConnectionPeerEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	/** Why a connection ended. */
	public enum Cause {

		/**
		 * The peer or the network ended it: an rdma_cm event ({@code DISCONNECTED},
		 * {@code DEVICE_REMOVAL}, ...; {@link #getDetail()} names it), or the end of the
		 * out-of-band exchange's link.
		 */
		DISCONNECTED,

		/**
		 * A work request completed with an error other than a flush, which leaves the
		 * queue pair in the error state (often without any rdma_cm event):
		 * {@link #getDetail()} is its status, such as {@code RETRY_EXC_ERR}.
		 */
		FAILED_COMPLETION,

		/** The application called {@link RdmaConnection#disconnect()}. */
		APPLICATION

	}

	private final Cause cause;

	private final String detail;

	/**
	 * The connection {@code peer} of {@code connection}'s bean, with {@code peerAddress},
	 * ended for {@code cause}, described by {@code detail}.
	 */
	public RdmaConnectionEndedEvent(RdmaConnection connection, RdmaConnection peer,
			@Nullable InetSocketAddress peerAddress, Cause cause, String detail) {
		super(connection, peer, peerAddress);
		this.cause = cause;
		this.detail = detail;
	}

	/** Why it ended. */
	public Cause getCause() {
		return cause;
	}

	/**
	 * The end in detail, as the {@code rdma.connection.errors} meter's {@code kind} tag
	 * counts it: the rdma_cm event ({@code DISCONNECTED}, {@code DEVICE_REMOVAL}), the
	 * failed completion's status ({@code RETRY_EXC_ERR}), or {@code disconnect()}.
	 */
	public String getDetail() {
		return detail;
	}

	@Override
	String describe() {
		return super.describe() + ", " + cause + " (" + detail + ")";
	}

}
