package dev.rdma.verbs.apisequence;

/**
 * A broken contract, found by a sequence: the message says which rule, on which object,
 * in which action.
 */
public final class SequenceFailure extends AssertionError {

	private static final long serialVersionUID = 1L;

	public SequenceFailure(String message) {
		super(message);
	}

	public SequenceFailure(String message, Throwable cause) {
		super(message, cause);
	}

}
