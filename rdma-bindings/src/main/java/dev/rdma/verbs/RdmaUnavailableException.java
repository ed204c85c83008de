package dev.rdma.verbs;

/**
 * libibverbs cannot be loaded on this machine (not installed, or an unsupported
 * architecture). The message names the packages to install.
 */
public class RdmaUnavailableException extends RdmaException {

	private static final long serialVersionUID = 1L;

	public RdmaUnavailableException(String message, Throwable cause) {
		super(message, cause);
	}

}
