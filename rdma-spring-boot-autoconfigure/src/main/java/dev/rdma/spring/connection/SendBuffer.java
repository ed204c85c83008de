package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;

/**
 * A registered send buffer lent by a connection
 * ({@link RdmaConnection#borrowSendBuffer()}): the application writes its message into
 * {@link #segment()} and {@link #send(int)}s it without a copy ({@code ibv_post_send},
 * IBV_WR_SEND, posted from this very memory), or {@link #write(long, int)}s it into the
 * peer's region (IBV_WR_RDMA_WRITE). For large messages this saves the copy
 * {@code send(byte[])} and {@code write(long, byte[])} make.
 *
 * <p>
 * <b>Lifetime.</b> The buffer is the application's from the borrow until
 * {@link #send(int)} or {@link #close()}. After {@code send} it belongs to the device
 * until the send's completion, which gives it back to the connection; it is then lent
 * again, possibly to another thread through this same object. So drop the reference after
 * {@code send}: writing into the segment then corrupts a message in flight (or a later
 * borrower's). What is cheap to detect is refused: every method but {@code close()}
 * throws {@link IllegalStateException} once the buffer was sent or given back, until it
 * is borrowed again. {@code close()} gives back a buffer that was not sent and does
 * nothing after {@code send}, so that try-with-resources fits: {@code try (SendBuffer b =
 * c.borrowSendBuffer()) { ...; b.send(n); }}. A buffer neither sent nor closed stays out
 * of the connection's pool until the connection closes (which does not wait for it); its
 * segment is not accessible once the connection is closed.
 *
 * <p>
 * <b>Threading.</b> One thread at a time; handing it to another thread needs a
 * happens-before edge (a queue, a lock). Nothing is allocated by a borrow or a send: each
 * send buffer of a connection has its one {@code SendBuffer}.
 */
public interface SendBuffer extends AutoCloseable {

	/**
	 * The buffer: {@link RdmaConnection#maxMessageSize()} bytes of registered memory (its
	 * former contents are left over from earlier messages).
	 * @throws IllegalStateException once sent or given back
	 */
	MemorySegment segment();

	/**
	 * Sends the first {@code length} bytes of the buffer, as
	 * {@link RdmaConnection#send(MemorySegment)} sends a copy: same ordering, signaling,
	 * inline and error rules; the buffer goes back to the connection when the send
	 * completes.
	 * @throws IllegalArgumentException when {@code length} is negative or larger than the
	 * buffer (the buffer stays borrowed)
	 * @throws IllegalStateException when sent or given back already
	 * @throws ConnectionNotEstablishedException when the connection is no longer
	 * established (the buffer is given back)
	 */
	void send(int length);

	/**
	 * RDMA WRITE ({@code ibv_post_send}, IBV_WR_RDMA_WRITE) of the first {@code length}
	 * bytes of the buffer into the peer's region at {@code remoteOffset}, without a copy:
	 * as {@link RdmaConnection#write(long, MemorySegment)} writes a copy (same ordering,
	 * signaling, inline and error rules); the buffer goes back to the connection when the
	 * write completes, as after {@link #send(int)}.
	 * @throws IllegalArgumentException when {@code length} is negative or larger than the
	 * buffer, or {@code remoteOffset} and {@code length} do not fit in the peer's region
	 * (the buffer stays borrowed)
	 * @throws IllegalStateException when sent or given back already, or when the peer
	 * exposes no region (the buffer stays borrowed)
	 * @throws ConnectionNotEstablishedException when the connection is no longer
	 * established (the buffer stays borrowed: {@link #close()} gives it back)
	 */
	void write(long remoteOffset, int length);

	/**
	 * Gives the buffer back without sending it; nothing once it was sent or given back.
	 */
	@Override
	void close();

}
