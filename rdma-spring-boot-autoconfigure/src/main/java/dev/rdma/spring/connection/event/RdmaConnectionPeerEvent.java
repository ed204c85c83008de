package dev.rdma.spring.connection.event;

import java.io.Serial;
import java.net.InetSocketAddress;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * An event about one connection to a peer: its establishment
 * ({@link RdmaConnectionEstablishedEvent}) or its end ({@link RdmaConnectionEndedEvent}).
 * Listen for this type to receive both.
 */
public abstract class RdmaConnectionPeerEvent extends RdmaConnectionEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	private final transient RdmaConnection peer;

	private final @Nullable InetSocketAddress peerAddress;

	/**
	 * An event of the connection {@code peer} of {@code connection}'s bean, with
	 * {@code peerAddress}.
	 */
	protected RdmaConnectionPeerEvent(RdmaConnection connection, RdmaConnection peer,
			@Nullable InetSocketAddress peerAddress) {
		super(connection);
		this.peer = peer;
		this.peerAddress = peerAddress;
	}

	/**
	 * The connection to the peer itself: for a server, the accepted peer (the
	 * {@code RdmaMessage.connection()} of its messages, one of {@code peers()} while
	 * established); for a client, its current connection ({@code peers().get(0)}). Send
	 * to it or {@link RdmaConnection#disconnect()} it while it is established; once it
	 * ended it is closed (sends throw {@code ConnectionNotEstablishedException}). The
	 * ended event carries the same connection as its established event.
	 */
	public RdmaConnection getPeer() {
		return peer;
	}

	/**
	 * The peer's address as it was while connected (for {@code exchange: out-of-band}, of
	 * the exchange).
	 */
	public @Nullable InetSocketAddress getPeerAddress() {
		return peerAddress;
	}

	@Override
	String describe() {
		return ", peer " + peerAddress;
	}

}
