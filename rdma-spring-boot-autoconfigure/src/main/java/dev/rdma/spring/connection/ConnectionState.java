package dev.rdma.spring.connection;

/**
 * The state of an {@link RdmaConnection}, as the health indicator shows it.
 */
public enum ConnectionState {

	/** Not started yet (before the application context starts its lifecycle beans). */
	NEW,

	/**
	 * A client resolving, connecting, or waiting (back-off) before its next attempt; a
	 * server's peer being accepted.
	 */
	CONNECTING,

	/** A server bound and listening for peers (whether or not peers are connected). */
	LISTENING,

	/** Connected: messages can be sent. */
	ESTABLISHED,

	/**
	 * A client that gave up ({@code retry.max-attempts} attempts failed in a row) or that
	 * the application disconnected ({@code disconnect()}), until the connection is
	 * stopped and started again; a peer connection (a server's peer,
	 * {@code message.connection()}) that the peer, the network or a failed completion
	 * ended. A client whose connection ended is CONNECTING: it reconnects with back-off.
	 */
	DISCONNECTED,

	/**
	 * Stopped with the application context (final), or by the connection registry's
	 * {@code stop()}: its {@code start()} connects or listens again, with a new queue
	 * pair (the two-process sample's client reconnect). A peer connection the application
	 * disconnected ({@code disconnect()}) is CLOSED from the call on.
	 */
	CLOSED

}
