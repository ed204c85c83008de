package dev.rdma.verbs.cm;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.RdmaException;

/**
 * A connection step did not succeed: an error event arrived (address or route error,
 * unreachable, rejected, connect error, disconnected, device removal), the wait for its
 * event timed out, or the connection id was closed or woken meanwhile. The message names
 * the step (the librdmacm call that started it), the event and its status.
 */
public class ConnectionException extends RdmaException {

	private static final long serialVersionUID = 1L;

	private final String verb;

	private final transient @Nullable CmEvent event;

	ConnectionException(String verb, String message, @Nullable CmEvent event) {
		super(verb + ": " + message);
		this.verb = verb;
		this.event = event;
	}

	/** The librdmacm call whose outcome was awaited, e.g. {@code rdma_connect}. */
	public String verb() {
		return verb;
	}

	/** The event that ended the step, or null for a timeout, a wake-up or a close. */
	public @Nullable CmEvent event() {
		return event;
	}

	/** The type of {@link #event()}, or null. */
	public @Nullable CmEventType eventType() {
		return event == null ? null : event.type();
	}

	/**
	 * The private data of the event (e.g. the reason a server put into
	 * {@code rdma_reject}), empty when there is no event.
	 */
	public byte[] privateData() {
		return event == null ? new byte[0] : event.privateData();
	}

}
