package dev.rdma.spring.connection.support;

import java.time.Duration;

import org.jspecify.annotations.Nullable;

/**
 * The rate at which a server logs refused peers: the first refusal at once, then at most
 * one line per interval, which tells how many were refused since the last line and not
 * logged. A flood of connect requests thus writes one line per interval, and the
 * {@code rdma.connection.rejected} counter keeps the full count. Thread-safe.
 */
final class RefusalLog {

	/** The interval of a server's refusal lines. */
	static final Duration INTERVAL = Duration.ofSeconds(10);

	private final long intervalNanos;

	private final String per;

	private boolean logged;

	private long lastLine;

	private long suppressed;

	RefusalLog(Duration interval) {
		this.intervalNanos = interval.toNanos();
		this.per = (interval.toMillis() % 1000 == 0) ? interval.toSeconds() + "s" : interval.toMillis() + "ms";
	}

	/**
	 * The line to log for a refusal described by {@code text} at {@code now}
	 * ({@link System#nanoTime()}), or null when it is not to be logged (counted as
	 * suppressed).
	 */
	synchronized @Nullable String line(String text, long now) {
		if (logged && now - lastLine < intervalNanos) {
			suppressed++;
			return null;
		}
		String line = text;
		if (suppressed > 0) {
			line += " (" + suppressed + " more peer(s) refused since the last such line, not logged; at most one "
					+ "line per " + per + ")";
		}
		logged = true;
		lastLine = now;
		suppressed = 0;
		return line;
	}

	/** Refusals not logged since the last line. */
	synchronized long suppressed() {
		return suppressed;
	}

}
