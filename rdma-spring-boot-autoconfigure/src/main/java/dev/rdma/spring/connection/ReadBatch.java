package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;

/**
 * Several RDMA READs of the peer's region posted with one doorbell and awaited together:
 * one {@code ibv_post_send} of a chain of work requests (IBV_WR_RDMA_READ, each
 * signaled), made by {@link RdmaConnection#newReadBatch()}. Where
 * {@link RdmaConnection#read(long, MemorySegment)} keeps one READ in flight per calling
 * thread, a batch keeps as many in flight as it holds, from one thread: what perftest's
 * {@code ib_read_bw} does with its outstanding reads. Reusable: after {@link #read()} (or
 * {@link #clear()}) it is empty again; nothing is allocated per READ.
 *
 * <p>
 * <b>Buffers.</b> {@link #read()} reads each entry into a registered send buffer, then
 * copies it into its target. It takes as many free send buffers as it can get, waiting up
 * to {@code send-timeout} only when it holds none (so that two threads reading at once
 * never wait for each other's buffers); the entries that found no buffer go out in a
 * further chain once the first ones came back. A batch holds at most {@code send-depth}
 * entries of at most {@link RdmaConnection#maxMessageSize()} bytes each.
 *
 * <p>
 * <b>Errors.</b> {@code read()} returns once every READ completed and was copied. When
 * some failed or did not complete within {@code send-timeout} ({@code connect-timeout}
 * when that is 0), it still waits for the others of their chain, then throws
 * {@link RemoteAccessException} naming how many failed; the targets of the READs that
 * completed hold their bytes, the others are untouched. A READ that timed out keeps its
 * buffer until its completion arrives. Offsets and sizes are checked against the peer's
 * region before anything is posted.
 *
 * <p>
 * <b>Threading.</b> Not thread-safe: one batch per reading thread (make it once, reuse
 * it). Never call {@code read()} on the poller thread of the connection's send queue (see
 * {@link RdmaConnection#read(long, MemorySegment)}). The connection it reads from is the
 * one its {@link RdmaConnection} sends to when {@code read()} is called (a client's
 * current connection, a server's one peer).
 */
public interface ReadBatch {

	/**
	 * Adds a READ of {@code target.byteSize()} bytes of the peer's region at
	 * {@code remoteOffset} into {@code target}, which must stay valid until
	 * {@link #read()} returned. Nothing is posted yet.
	 * @throws IllegalArgumentException when {@code target} is read-only or longer than
	 * {@link RdmaConnection#maxMessageSize()}, or {@code remoteOffset} is negative
	 * @throws IllegalStateException when the batch holds {@code send-depth} entries
	 */
	ReadBatch add(long remoteOffset, MemorySegment target);

	/** The READs added since the last {@link #read()} or {@link #clear()}. */
	int size();

	/**
	 * Posts the READs added, as one chain when enough send buffers are free, waits for
	 * them all and copies each into its target; empties the batch (also when it throws).
	 * Nothing when it is empty.
	 * @throws IllegalArgumentException when an entry does not fit in the peer's region
	 * (nothing was posted)
	 * @throws IllegalStateException when the peer exposes no region, or when called on
	 * the send queue's poller thread
	 * @throws RemoteAccessException when READs failed or did not complete within the
	 * timeout
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout
	 * @throws ConnectionNotEstablishedException when not established
	 */
	void read();

	/** Empties the batch without reading. */
	void clear();

}
