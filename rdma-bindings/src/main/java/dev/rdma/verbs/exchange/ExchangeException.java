package dev.rdma.verbs.exchange;

import dev.rdma.verbs.RdmaException;

/**
 * An out-of-band exchange failed: no peer within the connect or accept timeout, a peer
 * that closed the connection early, did not answer within the I/O timeout, or sent
 * something that is not an endpoint record. The message names the peer and the step.
 */
public class ExchangeException extends RdmaException {

	private static final long serialVersionUID = 1L;

	public ExchangeException(String message) {
		super(message);
	}

	public ExchangeException(String message, Throwable cause) {
		super(message, cause);
	}

}
