package dev.rdma.spring.connection.support;

/**
 * One connection attempt (or accept) failed; {@link #kind()} is what the connection's
 * error meter counts it as: the rdma_cm event type (REJECTED, UNREACHABLE...), TIMEOUT,
 * or the failing verb.
 */
final class AttemptFailedException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	private final String kind;

	AttemptFailedException(String kind, String message) {
		super(message);
		this.kind = kind;
	}

	AttemptFailedException(String kind, String message, Throwable cause) {
		super(message, cause);
		this.kind = kind;
	}

	String kind() {
		return kind;
	}

}
