package dev.rdma.spring.connection;

/**
 * An RDMA READ of {@link RdmaConnection#read} that did not complete: its completion
 * failed (the message names the work completion status), or did not arrive within the
 * connection's timeout.
 */
public class RemoteAccessException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	public RemoteAccessException(String message) {
		super(message);
	}

}
