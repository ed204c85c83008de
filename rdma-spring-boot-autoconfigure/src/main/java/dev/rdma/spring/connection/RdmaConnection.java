package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;

import org.jspecify.annotations.Nullable;

/**
 * A reliable connection (an RC queue pair connected through rdma_cm) to another
 * application, declared under {@code rdma.connections.<name>} and injectable by that
 * name. A client's bean is its one connection, reconnected under the same bean; a
 * server's bean stands for all the peers it accepted ({@link #peers()}), and sends to its
 * one peer when there is exactly one. A message listener replies through
 * {@link RdmaMessage#connection()}, the peer the message came from.
 *
 * <p>
 * <b>Sending</b> ({@code ibv_post_send}, IBV_WR_SEND, signaled) copies the message into
 * one of the connection's registered send buffers ({@code send-depth} of them, each
 * {@code message-size} bytes, registered once) and posts it; it returns once posted. A
 * buffer comes free when the send's completion is polled by the send queue's poller.
 * <b>Back-pressure:</b> when every buffer is in flight, {@code send} blocks up to the
 * connection's {@code send-timeout}, then throws {@link SendQueueFullException} (with
 * {@code send-timeout: 0} it throws at once). A message counts as <i>sent</i>
 * ({@link ConnectionStatistics#messagesSent()}) when its completion arrives with success:
 * the peer's adapter acknowledged it into a receive buffer. A send posted before a
 * disconnect may fail (flushed) instead: the application resends what it must not lose.
 * Nothing is allocated per message.
 *
 * <p>
 * <b>Threading.</b> All methods are thread-safe; sends from several threads are posted in
 * some order each.
 */
public interface RdmaConnection {

	/** The key under {@code rdma.connections} (also the bean name). */
	String name();

	/** The current state. */
	ConnectionState state();

	/** True for a connection declared with {@code listen}. */
	boolean isServer();

	/**
	 * The RDMA device the connection's queue pair is on (e.g. {@code rxeA}), or null
	 * before it is established.
	 */
	@Nullable String deviceName();

	/** The peer's address, or null when not connected (or a server with no peer). */
	@Nullable InetSocketAddress peerAddress();

	/** This end's address, or null when not connected (a server: its listen address). */
	@Nullable InetSocketAddress localAddress();

	/**
	 * For a server, its connected peers (a snapshot); for a client or a peer, itself when
	 * established, else empty.
	 */
	List<RdmaConnection> peers();

	/** The largest message in bytes ({@code message-size}). */
	int maxMessageSize();

	/**
	 * Sends {@code length} bytes of {@code data} from {@code offset}.
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 * @throws IllegalArgumentException when longer than {@link #maxMessageSize()}
	 */
	void send(byte[] data, int offset, int length);

	/** Sends all of {@code data}; see {@link #send(byte[], int, int)}. */
	default void send(byte[] data) {
		send(data, 0, data.length);
	}

	/**
	 * Sends the remaining bytes of {@code data} (its position is not changed); see
	 * {@link #send(byte[], int, int)}.
	 */
	void send(ByteBuffer data);

	/** Sends the bytes of {@code data}; see {@link #send(byte[], int, int)}. */
	void send(MemorySegment data);

	/** The counters of this connection (for a server: of all its peers). */
	ConnectionStatistics statistics();

}
