package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.cm.CmParameters;

/**
 * The resolved settings of one {@code rdma.connections.<name>} (validated before they get
 * here).
 *
 * @param name the key (and bean name)
 * @param server true for {@code listen}, false for {@code connect}
 * @param address the address to listen on, or to connect to
 * @param source a client's source address, or null
 * @param maxPeers how many peers a server keeps connected at once
 * @param connectTimeout bound of one connection attempt (resolve, route, connect) or of
 * one accept
 * @param retry a client's back-off between attempts
 * @param sendQueue the key of the send completion queue
 * @param receiveQueue the key of the receive completion queue
 * @param sendDepth max_send_wr, and the number of registered send buffers
 * @param receiveDepth max_recv_wr
 * @param receiveBuffers receive buffers kept posted (at most receiveDepth)
 * @param messageSize bytes per send and receive buffer
 * @param sendTimeout how long a send waits for a free send buffer
 * @param required whether the health indicator is DOWN while not established
 * @param cm the rdma_cm connection parameters
 * @param closeTimeout bound of closing one peer connection (rdma.shutdown-timeout): its
 * disconnect and the drain of its flushed work requests through the pollers
 * @param remoteAccessSize bytes of the region each peer connection registers for the
 * peer's RDMA WRITE and READ (and advertises in its connect or accept private data), 0 =
 * none
 * @param outOfBand the out-of-band exchange that connects the queue pairs instead of
 * rdma_cm ({@code exchange: out-of-band}), or null for rdma_cm
 * @param dataPath how sends are posted: inline data and selective signaling
 * @param sharedReceive a server's shared receive queue, or null: each peer has its own
 * receive buffers
 */
public record ConnectionSettings(String name, boolean server, InetSocketAddress address,
		@Nullable InetSocketAddress source, int maxPeers, Duration connectTimeout, Retry retry, String sendQueue,
		String receiveQueue, int sendDepth, int receiveDepth, int receiveBuffers, int messageSize, Duration sendTimeout,
		boolean required, CmParameters cm, Duration closeTimeout, long remoteAccessSize,
		@Nullable OutOfBandOptions outOfBand, DataPath dataPath, @Nullable SharedReceive sharedReceive) {

	public ConnectionSettings {
		Objects.requireNonNull(name, "name");
		Objects.requireNonNull(dataPath, "dataPath");
		Objects.requireNonNull(address, "address");
		Objects.requireNonNull(retry, "retry");
		if (remoteAccessSize < 0) {
			throw new IllegalArgumentException("remoteAccessSize must not be negative, got " + remoteAccessSize);
		}
		if (sharedReceive != null && !server) {
			throw new IllegalArgumentException("a shared receive queue is for a server, '" + name + "' is a client");
		}
	}

	/** Settings without a shared receive queue. */
	public ConnectionSettings(String name, boolean server, InetSocketAddress address,
			@Nullable InetSocketAddress source, int maxPeers, Duration connectTimeout, Retry retry, String sendQueue,
			String receiveQueue, int sendDepth, int receiveDepth, int receiveBuffers, int messageSize,
			Duration sendTimeout, boolean required, CmParameters cm, Duration closeTimeout, long remoteAccessSize,
			@Nullable OutOfBandOptions outOfBand, DataPath dataPath) {
		this(name, server, address, source, maxPeers, connectTimeout, retry, sendQueue, receiveQueue, sendDepth,
				receiveDepth, receiveBuffers, messageSize, sendTimeout, required, cm, closeTimeout, remoteAccessSize,
				outOfBand, dataPath, null);
	}

	/**
	 * A server's shared receive queue
	 * ({@code rdma.connections.<name>.shared-receive-queue}): every peer's QP receives
	 * from one SRQ of {@code depth} buffers of {@code message-size} bytes.
	 *
	 * @param depth the SRQ's max_wr, and the number of its registered receive buffers
	 * @param limit the low-water mark: fewer posted receives than this raise
	 * SRQ_LIMIT_REACHED (a refill, and the limit armed again); 0 = no limit
	 */
	public record SharedReceive(int depth, int limit) {

		public SharedReceive {
			if (depth < 1) {
				throw new IllegalArgumentException("depth must be at least 1, got " + depth);
			}
			if (limit < 0 || limit >= depth) {
				throw new IllegalArgumentException("limit must be in [0, depth), got " + limit);
			}
		}

	}

	/** Settings with the default {@link DataPath}. */
	public ConnectionSettings(String name, boolean server, InetSocketAddress address,
			@Nullable InetSocketAddress source, int maxPeers, Duration connectTimeout, Retry retry, String sendQueue,
			String receiveQueue, int sendDepth, int receiveDepth, int receiveBuffers, int messageSize,
			Duration sendTimeout, boolean required, CmParameters cm, Duration closeTimeout, long remoteAccessSize,
			@Nullable OutOfBandOptions outOfBand) {
		this(name, server, address, source, maxPeers, connectTimeout, retry, sendQueue, receiveQueue, sendDepth,
				receiveDepth, receiveBuffers, messageSize, sendTimeout, required, cm, closeTimeout, remoteAccessSize,
				outOfBand, DataPath.DEFAULTS);
	}

	/**
	 * How a connection posts its sends ({@code rdma.connections.<name>.max-inline-data}
	 * and {@code .signal-interval}).
	 *
	 * @param maxInlineData the {@code max_inline_data} asked for the QP; a send of at
	 * most what the provider granted is posted IBV_SEND_INLINE (0: never)
	 * @param signalInterval one send in this many is posted signaled (1: every one); the
	 * buffers of the unsignaled sends before it are given back, in post order, when its
	 * completion arrives
	 */
	public record DataPath(int maxInlineData, int signalInterval) {

		/** 64 bytes inline, every send signaled. */
		public static final DataPath DEFAULTS = new DataPath(64, 1);

		public DataPath {
			if (maxInlineData < 0) {
				throw new IllegalArgumentException("maxInlineData must not be negative, got " + maxInlineData);
			}
			if (signalInterval < 1) {
				throw new IllegalArgumentException("signalInterval must be at least 1, got " + signalInterval);
			}
		}

	}

	/**
	 * Settings connected through rdma_cm (no out-of-band exchange), without a
	 * remote-access region.
	 */
	public ConnectionSettings(String name, boolean server, InetSocketAddress address,
			@Nullable InetSocketAddress source, int maxPeers, Duration connectTimeout, Retry retry, String sendQueue,
			String receiveQueue, int sendDepth, int receiveDepth, int receiveBuffers, int messageSize,
			Duration sendTimeout, boolean required, CmParameters cm, Duration closeTimeout) {
		this(name, server, address, source, maxPeers, connectTimeout, retry, sendQueue, receiveQueue, sendDepth,
				receiveDepth, receiveBuffers, messageSize, sendTimeout, required, cm, closeTimeout, 0, null);
	}

	/**
	 * The options of an out-of-band exchange ({@code ibv_rc_pingpong}'s records over the
	 * TCP connection to {@code address}, which stays open as the link's liveness channel
	 * unless {@code liveness} is {@link Liveness#NONE}).
	 *
	 * @param port the RDMA device's port number, 1..255
	 * @param gidIndex the local GID index, or -1 to take the first IPv4 RoCE v2 GID
	 * ({@code dev.rdma.verbs.exchange.ExchangeOptions.FIND_GID})
	 * @param pathMtu the QP's path MTU in bytes, or {@link #DEFAULT_PATH_MTU} (0): 1024,
	 * or the port's active MTU when lower
	 * @param liveness what tells that the peer went away, besides a failed completion
	 */
	public record OutOfBandOptions(int port, int gidIndex, int pathMtu, Liveness liveness) {

		/**
		 * {@link #pathMtu()}: {@code ibv_rc_pingpong}'s 1024, or the port's active MTU
		 * when it is lower.
		 */
		public static final int DEFAULT_PATH_MTU = 0;

		public OutOfBandOptions {
			Objects.requireNonNull(liveness, "liveness");
		}

		/** With the default path MTU and liveness {@link Liveness#TCP}. */
		public OutOfBandOptions(int port, int gidIndex) {
			this(port, gidIndex, DEFAULT_PATH_MTU);
		}

		/** With liveness {@link Liveness#TCP}. */
		public OutOfBandOptions(int port, int gidIndex, int pathMtu) {
			this(port, gidIndex, pathMtu, Liveness.TCP);
		}

	}

	/**
	 * What tells an out-of-band link that its peer went away
	 * ({@code rdma.connections.<name>.out-of-band.liveness}).
	 */
	public enum Liveness {

		/**
		 * The exchange's TCP connection stays open: its end or reset ends the link, and
		 * closing it is the orderly disconnect. Both ends must keep it open.
		 */
		TCP,

		/**
		 * The exchange's TCP connection is closed after the records, as
		 * {@code ibv_rc_pingpong} does: only a failed completion ends the link (a send to
		 * a peer whose QP is gone fails with RETRY_EXC_ERR), and the QP's retry count is
		 * at most 6 so that it does fail (Soft-RoCE retries for ever at 7).
		 */
		NONE

	}

	/**
	 * A client's back-off: the first wait, its growth per failed attempt and its ceiling.
	 *
	 * @param initialInterval wait after the first failure
	 * @param multiplier growth of the wait per failure
	 * @param maxInterval the longest wait
	 * @param maxAttempts failed attempts in a row (counted afresh after each established
	 * connection) before the client gives up (state DISCONNECTED), 0 = never
	 */
	public record Retry(Duration initialInterval, double multiplier, Duration maxInterval, int maxAttempts) {

		/** The wait after {@code failures} consecutive failures (1 = the first). */
		public Duration interval(int failures) {
			double nanos = Deadlines.nanos(initialInterval) * Math.pow(multiplier, Math.max(0, failures - 1));
			return Duration.ofNanos((long) Math.min(nanos, Deadlines.nanos(maxInterval)));
		}

	}

}
