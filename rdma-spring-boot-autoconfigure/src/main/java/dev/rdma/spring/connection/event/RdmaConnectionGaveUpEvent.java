package dev.rdma.spring.connection.event;

import java.io.Serial;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * A client gave up: {@code retry.max-attempts} attempts failed in a row. It is
 * {@code DISCONNECTED} and makes no further attempt until the connections are started
 * again (the connection registry's {@code stop()} and {@code start()}). Published once by
 * the client's {@code rdma-connect-<name>} thread, as the thread's last act, after the
 * last {@link RdmaConnectionAttemptFailedEvent}: a listener may fail over, alert, or
 * close the application context from another thread (closed on this one, the stop would
 * wait for this very thread, up to half of {@code rdma.shutdown-timeout}).
 */
public class RdmaConnectionGaveUpEvent extends RdmaConnectionEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	private final int attempts;

	private final RuntimeException lastError;

	/** {@code connection} gave up after {@code attempts} failed attempts. */
	public RdmaConnectionGaveUpEvent(RdmaConnection connection, int attempts, RuntimeException lastError) {
		super(connection);
		this.attempts = attempts;
		this.lastError = lastError;
	}

	/** The failed attempts in a row ({@code retry.max-attempts}). */
	public int getAttempts() {
		return attempts;
	}

	/** Why the last attempt failed. */
	public RuntimeException getLastError() {
		return lastError;
	}

	@Override
	String describe() {
		return " after " + attempts + " attempts";
	}

}
