package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.function.ToIntFunction;

import org.jspecify.annotations.Nullable;

/**
 * A reliable connection (an RC queue pair, connected through rdma_cm or, with
 * {@code exchange: out-of-band}, through an exchange of endpoint records over TCP) to
 * another application, declared under {@code rdma.connections.<name>} and injectable by
 * that name. A client's bean is its one connection, reconnected under the same bean; a
 * server's bean stands for all the peers it accepted ({@link #peers()}), and sends to its
 * one peer when there is exactly one. A message listener replies through
 * {@link RdmaMessage#connection()}, the peer the message came from.
 *
 * <p>
 * <b>Sending</b> ({@code ibv_post_send}, IBV_WR_SEND, signaled) copies the message into
 * one of the connection's registered send buffers ({@code send-depth} of them, each
 * {@code message-size} bytes, registered once) and posts it; it returns once posted (or
 * ready for the thread posting at that moment, see <i>Ordering</i> below). A buffer comes
 * free when the send's completion is polled by the send queue's poller.
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
 * <b>Lifecycle.</b> The connections start and stop with the application context; in
 * between, {@link #disconnect()} ends one peer, and the
 * {@code dev.rdma.spring.connection.event} events tell the application when a peer
 * arrives, leaves, or a client fails to connect.
 *
 * <p>
 * <b>Batches, several threads, zero copy.</b> A {@link SendBatch}
 * ({@link #newSendBatch()}) hands several messages over that go out with one doorbell
 * (one {@code ibv_post_send} of a chain). Sends from several threads are coalesced
 * without a lock held across the post: each send takes a buffer, copies its message in,
 * then claims the next place in the connection's send order (an atomic increment) and
 * marks it ready; whichever thread finds no other thread posting posts everything that is
 * ready, in order, as one chain, and the others return at once. The {@code statistics()}
 * count the work requests posted ({@code sendsPosted}) and the posts ({@code sendPosts}):
 * more of the first than of the second is sends sharing a doorbell.
 * {@link #borrowSendBuffer()} and {@link #send(ToIntFunction)} let the application write
 * into a registered send buffer and send it without a copy.
 *
 * <p>
 * <b>Ordering.</b> Messages are posted, and on the reliable connection delivered, in the
 * order of their places: the messages of one thread in the order its calls returned, a
 * batch's messages one after the other in the order added, and a message whose
 * {@code send} returned before another's began ahead of it. {@code send} returns once its
 * message is posted or ready for the thread posting at that moment, which posts it before
 * it stops (a ready message waits only for the messages ahead of it, each between its
 * claim and its mark, a few instructions). A post the provider refuses (in practice only
 * while the connection closes) counts the messages it did not post in
 * {@link ConnectionStatistics#sendsRefused()} and {@code sendErrors}, as a flushed send
 * is counted, and their buffers go back; a batch's {@code send()} also throws
 * {@link SendRefusedException} naming them, a single send's caller is not told.
 *
 * <p>
 * <b>Threading.</b> All methods are thread-safe; a {@link SendBatch} and a
 * {@link SendBuffer} are used by one thread at a time.
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
	 * Lends a registered send buffer of {@link #maxMessageSize()} bytes to write a
	 * message into and {@link SendBuffer#send(int)} without a copy; the send's completion
	 * gives it back. Waits for a free buffer as {@code send} does. Allocates nothing. See
	 * {@link SendBuffer} for its lifetime.
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	SendBuffer borrowSendBuffer();

	/**
	 * Sends a message written in place: borrows a send buffer
	 * ({@link #borrowSendBuffer()}), calls {@code writer} with its segment
	 * ({@link #maxMessageSize()} bytes), which writes the message at its start and
	 * returns its length, and sends that many bytes without a copy. When {@code writer}
	 * throws, the buffer goes back unsent. Nothing is allocated (but a capturing lambda
	 * is an object of the caller's). The segment must not be used after {@code writer}
	 * returns.
	 * @throws IllegalArgumentException when the length returned does not fit in the
	 * buffer
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	default void send(ToIntFunction<MemorySegment> writer) {
		SendBuffer buffer = borrowSendBuffer();
		try {
			buffer.send(writer.applyAsInt(buffer.segment()));
		}
		finally {
			buffer.close(); // gives it back when writer threw or send(int) refused it
		}
	}

	/**
	 * A new, empty batch of messages to send with one doorbell ({@link SendBatch}); make
	 * one per sending thread and reuse it.
	 */
	SendBatch newSendBatch();

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
	 * RDMA WRITE ({@code ibv_post_send}, IBV_WR_RDMA_WRITE) of {@code data} into the
	 * peer's region at {@code remoteOffset}: copied into a registered send buffer
	 * (waiting for one up to {@code send-timeout}, as {@code send} does) and posted;
	 * returns once posted, and the buffer comes free when the write completed. WRITEs are
	 * signaled and inlined as SENDs are: one in {@code signal-interval} signaled (an
	 * unsignaled one's buffer comes back with the next signaled completion),
	 * IBV_SEND_INLINE up to the QP's {@code max_inline_data}. Data longer than
	 * {@link #maxMessageSize()} is written in several WRITEs of up to that size, each in
	 * its own buffer. Nothing is allocated.
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
	 * caller until then, up to {@code send-timeout} ({@code connect-timeout} when that is
	 * 0). Reads longer than {@link #maxMessageSize()} are done in chunks of that size,
	 * posted together as far as free send buffers allow (one chain, one doorbell) and
	 * awaited together. Nothing is allocated. For several READs in flight from one
	 * thread, see {@link #newReadBatch()} and {@link #newReadStream(int)}.
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

	/**
	 * A new, empty batch of RDMA READs posted with one doorbell and awaited together
	 * ({@link ReadBatch}): several READs in flight from one thread. Make one per reading
	 * thread and reuse it.
	 */
	ReadBatch newReadBatch();

	/**
	 * A new stream of RDMA READs that keeps up to {@code window} of them in flight from
	 * one thread, posting each as it is submitted and reaping the oldest when the window
	 * is full ({@link ReadStream}): perftest's {@code ib_read_bw} loop. Make one per
	 * reading thread; close it before dropping it.
	 * @param window the most READs in flight, 1 to {@code send-depth}
	 * @throws IllegalArgumentException when {@code window} is out of that range
	 */
	ReadStream newReadStream(int window);

	/** The counters of this connection (for a server: of all its peers). */
	ConnectionStatistics statistics();

	/**
	 * Ends this connection in an orderly way, as the peer ending it would: rdma_cm's
	 * {@code rdma_disconnect} (out of band: the link's orderly close), the queue pair to
	 * the error state, the sends and receives in flight completed or flushed through the
	 * pollers, every listener call for it returned and retained message released, then
	 * the queue pair, its buffers and its rdma_cm id destroyed, within
	 * {@code rdma.shutdown-timeout}. Then a
	 * {@link dev.rdma.spring.connection.event.RdmaConnectionEndedEvent} with cause
	 * {@code APPLICATION} is published.
	 * <ul>
	 * <li><b>A server's peer</b> (a message's {@link RdmaMessage#connection()}, one of
	 * {@link #peers()}, an established event's peer): that peer only; it leaves
	 * {@link #peers()} at once, and the server keeps listening and accepting.</li>
	 * <li><b>A server's bean</b>: every current peer, as above; the server keeps
	 * listening (stopping it is the application context's job).</li>
	 * <li><b>A client</b> (its bean, or its current connection {@code peers().get(0)}):
	 * its connection, and it does not reconnect: it stays
	 * {@link ConnectionState#DISCONNECTED}, as after giving up, until the connections are
	 * started again (the connection registry's {@code stop()} then {@code start()}, as
	 * for a client that gave up; the registry owns the connections' lifecycle, so a
	 * restart is that of the whole {@code rdma.connections}). A client still connecting
	 * stops trying.</li>
	 * </ul>
	 * Named after the verb it wraps, not {@code close()}: the bean is the application
	 * context's, which closes it on shutdown (this method does not release it, and it is
	 * not {@code AutoCloseable}, so Spring does not call it as a destroy method).
	 *
	 * <p>
	 * <b>Threading.</b> Returns at once and never waits: the connection's own thread
	 * ({@code rdma-accept-<name>}, {@code rdma-connect-<name>}) does the close, so it may
	 * be called from any thread, including a message listener on its poller thread (the
	 * close waits for that poller to flush the work requests, which it could not do while
	 * blocked in this call). Sends after it returns throw
	 * {@link ConnectionNotEstablishedException}; messages already received still reach
	 * the listener. Idempotent; no effect on a connection that is not established or
	 * started (a client that is not running, a peer that ended).
	 */
	void disconnect();

}
