package dev.rdma.spring.connection;

/**
 * Thrown by {@link RdmaConnection#send} when the connection is not
 * {@link ConnectionState#ESTABLISHED} (a client still connecting or reconnecting, a
 * server without a peer, a closed connection); nothing was sent.
 */
public class ConnectionNotEstablishedException extends IllegalStateException {

	private static final long serialVersionUID = 1L;

	public ConnectionNotEstablishedException(String message) {
		super(message);
	}

}
