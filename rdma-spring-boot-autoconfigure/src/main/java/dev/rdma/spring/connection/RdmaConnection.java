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
 * <b>One-sided operations</b> ({@code ibv_post_send}, IBV_WR_RDMA_WRITE /
 * IBV_WR_RDMA_READ, signaled). With {@code remote-access-size} set, each side registers a
 * region of that size (remote write and read access) per connection,
 * {@link #localRegion()}, and tells the peer its address, rkey and size in the connect or
 * accept private data; {@link #write(long, MemorySegment)} and
 * {@link #read(long, MemorySegment)} then reach into the peer's region without involving
 * the peer's CPU or listener. They go through the same send buffers (and back-pressure)
 * as {@code send}, and allocate nothing.
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

	/**
	 * This side's region that the peer may write and read (RDMA WRITE / READ with its
	 * rkey), {@code remote-access-size} bytes: a view of registered memory, read and
	 * written by this application directly. A new region for each connection (a client
	 * gets a new one when it reconnects, each peer of a server has its own); the segment
	 * is valid while this connection is established, and fails with an
	 * {@link IllegalStateException} once it is closed. The peer's writes land in it
	 * without any notification: the peer sends a message after writing (see
	 * {@link #write(long, MemorySegment)}). For a server, the region of its only peer.
	 * @throws IllegalStateException when {@code remote-access-size} is 0 (no region)
	 * @throws ConnectionNotEstablishedException when not established
	 */
	MemorySegment localRegion();

	/**
	 * Bytes of the peer's region that {@link #write(long, MemorySegment)} and
	 * {@link #read(long, MemorySegment)} can reach, as the peer advertised when
	 * connecting; 0 when it exposes none (its {@code remote-access-size} is 0, or it is
	 * not this starter, e.g. rdma-core's {@code rdma_client}).
	 * @throws ConnectionNotEstablishedException when not established
	 */
	long remoteRegionSize();

	/**
	 * RDMA WRITE ({@code ibv_post_send}, IBV_WR_RDMA_WRITE, signaled) of {@code data}
	 * into the peer's region at {@code remoteOffset}: copied into a registered send
	 * buffer (waiting for one up to {@code send-timeout}, as {@code send} does) and
	 * posted; returns once posted, and the buffer comes free when the write's completion
	 * arrives. Data longer than {@link #maxMessageSize()} is written in several WRITEs of
	 * up to that size, each in its own buffer. Nothing is allocated.
	 *
	 * <p>
	 * The peer is not told: on a reliable connection the adapter executes a connection's
	 * operations in the order they were posted, so a {@code send} posted after the write
	 * reaches the peer's listener only after the written bytes are in its region. "Write,
	 * then send a small message" is how to notify the peer. A write that fails (the
	 * connection dropped) counts as a send error; if an exception is thrown after the
	 * first chunk was posted, a prefix of the data may have been written.
	 * @throws IllegalArgumentException when {@code remoteOffset} and the data's length do
	 * not fit in the peer's region (the message names both sizes)
	 * @throws IllegalStateException when the peer exposes no region
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	void write(long remoteOffset, MemorySegment data);

	/**
	 * RDMA WRITE of {@code length} bytes of {@code data} from {@code offset}; see
	 * {@link #write(long, MemorySegment)}.
	 */
	void write(long remoteOffset, byte[] data, int offset, int length);

	/** RDMA WRITE of all of {@code data}; see {@link #write(long, MemorySegment)}. */
	default void write(long remoteOffset, byte[] data) {
		write(remoteOffset, data, 0, data.length);
	}

	/**
	 * RDMA READ ({@code ibv_post_send}, IBV_WR_RDMA_READ, signaled) of
	 * {@code target.byteSize()} bytes of the peer's region at {@code remoteOffset} into
	 * {@code target}: read into a registered send buffer (taken as {@code send} takes
	 * one), then, once its completion arrived, copied into {@code target}. Blocks the
	 * caller until then, each completion waited for up to {@code send-timeout}
	 * ({@code connect-timeout} when that is 0). Reads longer than
	 * {@link #maxMessageSize()} are done in chunks of that size, one after the other.
	 * Nothing is allocated.
	 *
	 * <p>
	 * A READ that timed out keeps its buffer until its completion finally arrives (the
	 * adapter may still write into it). Never call this on the poller thread of the
	 * connection's send queue (e.g. from a message listener when both queues share a
	 * poller): it would wait for a completion only that thread can deliver. Such a call
	 * throws {@link IllegalStateException} when the thread is recognised, else it times
	 * out. A read the peer's region has not been written to returns zeros.
	 * @throws IllegalArgumentException when {@code remoteOffset} and
	 * {@code target.byteSize()} do not fit in the peer's region, or {@code target} is
	 * read-only
	 * @throws IllegalStateException when the peer exposes no region, or when called on
	 * the send queue's poller thread
	 * @throws RemoteAccessException when the READ's completion failed or did not arrive
	 * within the timeout
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	void read(long remoteOffset, MemorySegment target);

	/** The counters of this connection (for a server: of all its peers). */
	ConnectionStatistics statistics();

}
