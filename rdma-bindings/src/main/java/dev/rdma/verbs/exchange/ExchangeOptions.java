package dev.rdma.verbs.exchange;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

import dev.rdma.verbs.QueuePair.ConnectionParameters;

/**
 * The settings of an out-of-band exchange and of the connection it sets up. Immutable;
 * {@link #defaults()} gives rdma-core's {@code ibv_rc_pingpong} values, each
 * {@code withX} a copy with one value changed.
 *
 * @param port the local port number ({@code -i}), 1..255
 * @param gidIndex the local GID index ({@code -g}); {@link #FIND_GID}: the first IPv4
 * RoCE v2 GID among the first {@value OutOfBand#GID_SCAN_ENTRIES} entries, on InfiniBand
 * none; {@link #NO_GID}: addressed by LID only
 * @param parameters the RC connection parameters: {@code sqPsn} is the PSN this side
 * announces, {@code rqPsn} is replaced by the peer's. The path MTU is this side's alone
 * ({@link ConnectionParameters#ACTIVE_MTU}: the local port's active MTU): the pingpong
 * record carries no MTU ({@link PingpongWire}), so nothing is learnt from the peer, and
 * both sides must be configured with the same path MTU (against {@code ibv_rc_pingpong}:
 * 1024, the one of {@link #defaults()}, or the value of its {@code -m})
 * @param connectTimeout bound on the TCP connect (client) or accept (server)
 * @param ioTimeout bound on the arrival of each whole record of the peer (its endpoint
 * record, its {@code "done"}), however the peer splits it
 *
 * <p>
 * Both timeouts are positive and at most {@value Integer#MAX_VALUE} ms; the socket calls
 * they bound take whole milliseconds, so a timeout under 1 ms (or with a fraction of a
 * millisecond) is rounded up to the next millisecond, never down to 0, which the socket
 * calls take as "no timeout".
 */
public record ExchangeOptions(int port, int gidIndex, ConnectionParameters parameters, Duration connectTimeout,
		Duration ioTimeout) {

	/** {@link #gidIndex()}: find it by type. */
	public static final int FIND_GID = -1;

	/** {@link #gidIndex()}: no GID, LID addressing (InfiniBand). */
	public static final int NO_GID = -2;

	/** {@code ibv_rc_pingpong}'s TCP port, 18515. */
	public static final int PINGPONG_TCP_PORT = 18515;

	public ExchangeOptions {
		if (port < 1 || port > 255) {
			throw new IllegalArgumentException("port must be 1..255, got " + port);
		}
		if (gidIndex < NO_GID || gidIndex > 255) {
			throw new IllegalArgumentException(
					"gidIndex must be 0..255, FIND_GID (-1) or NO_GID (-2), got " + gidIndex);
		}
		Objects.requireNonNull(parameters, "parameters");
		requirePositive("connectTimeout", connectTimeout);
		requirePositive("ioTimeout", ioTimeout);
	}

	private static final Duration MAX_TIMEOUT = Duration.ofMillis(Integer.MAX_VALUE);

	private static void requirePositive(String name, Duration d) {
		Objects.requireNonNull(d, name);
		if (d.isNegative() || d.isZero() || d.compareTo(MAX_TIMEOUT) > 0) {
			throw new IllegalArgumentException(name + " must be positive and at most " + Integer.MAX_VALUE
					+ " ms (a bound is required), got " + d);
		}
	}

	/**
	 * {@code nanos} as the millisecond timeout of a socket call: rounded up, at least 1
	 * (0 would mean no timeout at all), at most {@link Integer#MAX_VALUE}.
	 */
	static int socketMillis(long nanos) {
		long ms = nanos / 1_000_000 + (nanos % 1_000_000 > 0 ? 1 : 0);
		return Math.clamp(ms, 1, Integer.MAX_VALUE);
	}

	/**
	 * Port 1, GID found by type, {@code ibv_rc_pingpong}'s connection values (path MTU
	 * 1024, timeout 14, retry 7, RNR retry 7, min RNR timer 12, rd_atomic 1/1, hop limit
	 * 1, SL 0) with a random 24-bit PSN ({@code lrand48() & 0xffffff} there), 10 s to
	 * connect or accept, 10 s per read.
	 */
	public static ExchangeOptions defaults() {
		return new ExchangeOptions(1, FIND_GID,
				ConnectionParameters.DEFAULTS.withPathMtu(1024)
					.withSqPsn(ThreadLocalRandom.current().nextInt(ConnectionParameters.MAX_PSN + 1)),
				Duration.ofSeconds(10), Duration.ofSeconds(10));
	}

	public ExchangeOptions withPort(int port) {
		return new ExchangeOptions(port, gidIndex, parameters, connectTimeout, ioTimeout);
	}

	public ExchangeOptions withGidIndex(int gidIndex) {
		return new ExchangeOptions(port, gidIndex, parameters, connectTimeout, ioTimeout);
	}

	public ExchangeOptions withParameters(ConnectionParameters parameters) {
		return new ExchangeOptions(port, gidIndex, parameters, connectTimeout, ioTimeout);
	}

	public ExchangeOptions withConnectTimeout(Duration connectTimeout) {
		return new ExchangeOptions(port, gidIndex, parameters, connectTimeout, ioTimeout);
	}

	public ExchangeOptions withIoTimeout(Duration ioTimeout) {
		return new ExchangeOptions(port, gidIndex, parameters, connectTimeout, ioTimeout);
	}

}
