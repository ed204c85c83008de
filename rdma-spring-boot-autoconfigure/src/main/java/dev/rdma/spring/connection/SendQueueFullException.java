package dev.rdma.spring.connection;

/**
 * Thrown by {@link RdmaConnection#send} when every send buffer of the connection is still
 * in flight (as many sends posted as the send queue holds, their completions not polled
 * yet) for longer than the connection's {@code send-timeout}; nothing was sent. The
 * connection's {@code sendQueueFull} meter counts these.
 */
public class SendQueueFullException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	public SendQueueFullException(String message) {
		super(message);
	}

}
