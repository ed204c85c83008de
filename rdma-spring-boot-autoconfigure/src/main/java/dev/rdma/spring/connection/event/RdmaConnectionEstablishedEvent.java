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
public class RdmaConnectionEstablishedEvent extends RdmaConnectionPeerEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	private final @Nullable String deviceName;

	/**
	 * The connection {@code peer} of {@code connection}'s bean is established with
	 * {@code peerAddress} on RDMA device {@code deviceName}.
	 */
	public RdmaConnectionEstablishedEvent(RdmaConnection connection, RdmaConnection peer,
			@Nullable InetSocketAddress peerAddress, @Nullable String deviceName) {
		super(connection, peer, peerAddress);
		this.deviceName = deviceName;
	}

	/** The RDMA device of the connection's queue pair (e.g. {@code mlx5_0}). */
	public @Nullable String getDeviceName() {
		return deviceName;
	}

	@Override
	String describe() {
		return super.describe() + " on " + deviceName;
	}

}
