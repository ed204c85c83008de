package dev.rdma.spring.connection.event;

import java.io.Serial;
import java.time.Duration;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * An attempt of a client to connect failed (the server absent or refusing, a timeout, a
 * failing verb). Published by the client's {@code rdma-connect-<name>} thread before its
 * back-off, for every failed attempt (the log writes only the first and every tenth); the
 * last one before it gives up is followed by a {@link RdmaConnectionGaveUpEvent}.
 */
public class RdmaConnectionAttemptFailedEvent extends RdmaConnectionEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	private final int attempt;

	private final String kind;

	private final RuntimeException error;

	private final @Nullable Duration nextAttemptIn;

	/**
	 * Attempt {@code attempt} (counted from 1 since the last established connection)
	 * failed with {@code error}, counted as {@code kind}; the next one follows after
	 * {@code nextAttemptIn}, or none (null) when the client gives up.
	 */
	public RdmaConnectionAttemptFailedEvent(RdmaConnection connection, int attempt, String kind, RuntimeException error,
			@Nullable Duration nextAttemptIn) {
		super(connection);
		this.attempt = attempt;
		this.kind = kind;
		this.error = error;
		this.nextAttemptIn = nextAttemptIn;
	}

	/** The number of failed attempts in a row, this one included (from 1). */
	public int getAttempt() {
		return attempt;
	}

	/**
	 * The failure as the {@code rdma.connection.errors} meter's {@code kind} tag counts
	 * it ({@code REJECTED}, {@code UNREACHABLE}, {@code TIMEOUT}, {@code ADDR_ERROR},
	 * ...).
	 */
	public String getKind() {
		return kind;
	}

	/** Why the attempt failed; its message names the step and address. */
	public RuntimeException getError() {
		return error;
	}

	/** The back-off before the next attempt, or null when this was the last one. */
	public @Nullable Duration getNextAttemptIn() {
		return nextAttemptIn;
	}

	@Override
	String describe() {
		return ", attempt " + attempt + ", " + kind;
	}

}
