package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

/**
 * A verb failed. Carries the verb's name, the error number the verb reported (through
 * {@code errno}, captured in the same downcall, or as its return value, whichever
 * convention the verb uses) and its text.
 *
 * <p>
 * {@link #errno()} is 0 when the provider failed without saying why (some return NULL
 * without setting errno); a negative value is a provider-specific code that is not an
 * errno (mlx5's {@code ibv_poll_cq} returns -2).
 */
public class VerbsException extends RdmaException {

	private static final long serialVersionUID = 1L;

	private final String verb;

	private final int errno;

	public VerbsException(String verb, int errno, @Nullable String detail) {
		super(format(verb, errno, detail));
		this.verb = verb;
		this.errno = errno;
	}

	private static String format(String verb, int errno, @Nullable String detail) {
		String what = verb + " failed: " + Errno.describe(errno);
		return detail == null || detail.isEmpty() ? what : what + " (" + detail + ")";
	}

	/** The verb that failed, e.g. {@code ibv_create_cq}. */
	public String verb() {
		return verb;
	}

	/**
	 * The error number (EINVAL = 22 ...), 0 when unknown, negative for a provider code
	 * that is not an errno.
	 */
	public int errno() {
		return errno;
	}

	/** The symbolic name of {@link #errno()}, e.g. {@code EINVAL}. */
	public String errnoName() {
		return Errno.name(errno);
	}

	/** The C library's text for {@link #errno()}, e.g. {@code Invalid argument}. */
	public String errnoText() {
		return Errno.text(errno);
	}

}
