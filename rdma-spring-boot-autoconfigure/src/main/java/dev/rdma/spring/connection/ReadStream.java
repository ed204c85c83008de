package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;

/**
 * A stream of RDMA READs of the peer's region that keeps up to a window of them in flight
 * from one thread ({@code ibv_post_send}, IBV_WR_RDMA_READ, signaled): {@link #submit}
 * adds one READ and returns; when the window is full it first waits for the oldest READs
 * of the stream and copies them into their targets. This is the loop of perftest's
 * {@code ib_read_bw}: the adapter never runs dry between two groups of READs, as it does
 * between two {@link ReadBatch#read()} calls. READs are posted in groups of a quarter of
 * the window (one chain per group; a READ submitted while none of the stream's is posted
 * goes out at once, and {@link #flush()} posts what is left) and reaped in such groups,
 * so the calling thread is woken about once per group. Made by
 * {@link RdmaConnection#newReadStream(int)}; nothing is allocated per READ.
 *
 * <p>
 * <b>Order and completion.</b> The READs of a stream complete in the order they were
 * submitted (one reliable connection), so the targets are filled in that order: after
 * {@code submit} or {@link #flush()} returned, the first {@link #completed()} targets
 * submitted hold their bytes. A target must stay valid and untouched until then.
 *
 * <p>
 * <b>Buffers.</b> Each READ lands in a registered send buffer of the connection (taken as
 * {@code send} takes one), then is copied into its target when it is reaped. When no
 * buffer is free, {@code submit} reaps its own oldest READ first; only a stream with
 * nothing in flight waits for a buffer (up to {@code send-timeout}), so two streams or
 * readers never wait for each other's buffers.
 *
 * <p>
 * <b>Errors.</b> When a READ fails or does not complete within {@code send-timeout}
 * ({@code connect-timeout} when that is 0) from its post, the stream stops posting, waits
 * for every READ still in flight, then throws {@link RemoteAccessException} naming how
 * many failed; the stream is then empty and may be used again. A READ that timed out
 * keeps its buffer until its completion arrives. Offsets and sizes are checked against
 * the peer's region before each post.
 *
 * <p>
 * <b>Lifetime and threading.</b> Not thread-safe: one stream per reading thread. Never
 * use it on the poller thread of the connection's send queue (see
 * {@link RdmaConnection#read(long, MemorySegment)}). {@link #close()} (or
 * {@code flush()}) before dropping a stream: a READ left in flight keeps its send buffer
 * until it is reaped. The stream reads from the connection its {@link RdmaConnection}
 * sends to when a READ is submitted with nothing in flight (a client's current
 * connection, a server's one peer).
 */
public interface ReadStream extends AutoCloseable {

	/**
	 * Adds a READ of {@code target.byteSize()} bytes of the peer's region at
	 * {@code remoteOffset} into {@code target} (posted with its group, see above), after
	 * reaping the oldest group when the window is full (or no send buffer is free).
	 * @return the number of READs of this stream completed so far ({@link #completed()})
	 * @throws IllegalArgumentException when {@code target} is read-only or longer than
	 * {@link RdmaConnection#maxMessageSize()}, or does not fit in the peer's region at
	 * {@code remoteOffset} (nothing posted)
	 * @throws IllegalStateException when the peer exposes no region, or when called on
	 * the send queue's poller thread
	 * @throws RemoteAccessException when a READ of the stream failed or timed out (every
	 * other READ in flight was waited for)
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	long submit(long remoteOffset, MemorySegment target);

	/**
	 * Posts the pending READs, waits for every READ in flight and copies each into its
	 * target.
	 * @return the number of READs of this stream completed so far
	 * @throws RemoteAccessException when one failed or timed out (after waiting for all)
	 */
	long flush();

	/** READs of this stream completed (and copied) so far, failed ones excluded. */
	long completed();

	/** READs submitted and not reaped yet (posted, or pending in their group). */
	int inFlight();

	/** The most READs this stream keeps in flight. */
	int window();

	/**
	 * {@link #flush()}: idempotent; a stream with nothing in flight has nothing to
	 * release.
	 */
	@Override
	void close();

}
