package dev.rdma.spring.connection.event;

import java.io.Serial;
import java.net.InetSocketAddress;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * A connection to a peer is established: a client connected (also after a reconnect), or
 * a server accepted a peer. Published by the client's {@code rdma-connect-<name>} or the
 * server's {@code rdma-accept-<name>} thread once sends to the peer are accepted, before
 * the client waits for the connection's end or the server accepts its next peer: a
 * listener may greet the peer ({@code event.getPeer().send(...)}), which is how a server
 * speaks first to each new peer. Messages the peer sends meanwhile reach the
 * {@code @RdmaMessageListener} on its poller thread, possibly before this event.
 */
public class RdmaConnectionEstablishedEvent extends RdmaConnectionEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	private final transient RdmaConnection peer;

	private final @Nullable InetSocketAddress peerAddress;

	private final @Nullable String deviceName;

	/**
	 * The connection {@code peer} of {@code connection}'s bean is established with
	 * {@code peerAddress} on RDMA device {@code deviceName}.
	 */
	public RdmaConnectionEstablishedEvent(RdmaConnection connection, RdmaConnection peer,
			@Nullable InetSocketAddress peerAddress, @Nullable String deviceName) {
		super(connection);
		this.peer = peer;
		this.peerAddress = peerAddress;
		this.deviceName = deviceName;
	}

	/**
	 * The established connection itself: for a server, the accepted peer (the
	 * {@code RdmaMessage.connection()} of its messages, one of {@code peers()}); for a
	 * client, its current connection ({@code peers().get(0)}). Send to it, or
	 * {@link RdmaConnection#disconnect()} it; it is valid until it ends.
	 */
	public RdmaConnection getPeer() {
		return peer;
	}

	/** The peer's address (for {@code exchange: out-of-band}, of the exchange). */
	public @Nullable InetSocketAddress getPeerAddress() {
		return peerAddress;
	}

	/** The RDMA device of the connection's queue pair (e.g. {@code mlx5_0}). */
	public @Nullable String getDeviceName() {
		return deviceName;
	}

	@Override
	public String toString() {
		return "RdmaConnectionEstablishedEvent[" + getConnectionName() + ", peer " + peerAddress + " on " + deviceName
				+ "]";
	}

}
