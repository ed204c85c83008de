package dev.rdma.spring;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.VerbsException;

/**
 * The RDMA configuration cannot be applied: a property is invalid, a referenced device,
 * channel or queue is missing, a verb failed while creating a resource, or a listener
 * cannot be bound. {@code RdmaFailureAnalyzer} turns it into a description and an action.
 */
public class RdmaConfigurationException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	private final String property;

	private final String reason;

	private final String action;

	private final @Nullable String verb;

	private final int errno;

	private final @Nullable String errnoText;

	/**
	 * @param property the property path (e.g. {@code rdma.completion-queues.rx.entries})
	 * or listener the error is about
	 * @param reason what is wrong, starting with the property and its value where there
	 * is one
	 * @param action what to do about it
	 */
	public RdmaConfigurationException(String property, String reason, String action) {
		this(property, reason, action, null);
	}

	public RdmaConfigurationException(String property, String reason, String action, @Nullable Throwable cause) {
		super(reason + verbText(cause), cause);
		this.property = property;
		this.reason = reason;
		this.action = action;
		VerbsException verbs = verbsCause(cause);
		this.verb = verbs == null ? null : verbs.verb();
		this.errno = verbs == null ? 0 : verbs.errno();
		this.errnoText = verbs == null ? null : verbs.errnoName() + " (" + verbs.errnoText() + ")";
	}

	private static @Nullable VerbsException verbsCause(@Nullable Throwable cause) {
		for (Throwable t = cause; t != null; t = t.getCause()) {
			if (t instanceof VerbsException v) {
				return v;
			}
		}
		return null;
	}

	private static String verbText(@Nullable Throwable cause) {
		VerbsException v = verbsCause(cause);
		if (v != null) {
			return ": " + v.verb() + " failed with errno " + v.errno() + " " + v.errnoName() + " (" + v.errnoText()
					+ ")";
		}
		return cause == null || cause.getMessage() == null ? "" : ": " + cause.getMessage();
	}

	/** The property path or listener the error is about. */
	public String property() {
		return property;
	}

	/** What is wrong, without the verb details. */
	public String reason() {
		return reason;
	}

	/** What to do about it. */
	public String action() {
		return action;
	}

	/** The verb that failed, or null when no verb was involved. */
	public @Nullable String verb() {
		return verb;
	}

	/** The errno the verb reported, 0 when none. */
	public int errno() {
		return errno;
	}

	/** The symbolic name and text of {@link #errno()}, or null. */
	public @Nullable String errnoText() {
		return errnoText;
	}

}
