package dev.rdma.verbs;

/** Base of every exception this binding throws for native failures. */
public class RdmaException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	public RdmaException(String message) {
		super(message);
	}

	public RdmaException(String message, Throwable cause) {
		super(message, cause);
	}

}
