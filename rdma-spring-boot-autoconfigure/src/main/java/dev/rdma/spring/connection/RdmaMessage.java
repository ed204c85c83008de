package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * A received message as a {@link dev.rdma.spring.annotation.RdmaMessageListener} sees it:
 * a view of the registered receive buffer the message landed in (no copy), and the
 * connection it came from.
 *
 * <p>
 * <b>Lifetime.</b> The view is valid during the listener call only: when the listener
 * returns, the buffer is posted again for the next message and its bytes change. A
 * listener that needs the bytes later either copies them ({@link #toByteArray()},
 * {@link #copyTo}) or calls {@link #retain()}, and then {@link #release()} (from any
 * thread) when done: the buffer is posted again only then. A connection has a fixed
 * number of receive buffers ({@code receive-buffers}); every retained message holds one,
 * and with none posted the peer's sends wait (RNR) and finally fail. Closing the
 * connection (its end, or stopping) waits for its retained messages to be released, up to
 * {@code rdma.shutdown-timeout}; then it destroys the buffers, and a message still
 * retained must no longer be read ({@link #release()} is then harmless).
 *
 * <p>
 * <b>Threading.</b> Called on the poller thread of the connection's receive queue; the
 * object is reused for later messages of the same buffer, so keep no reference to it
 * after the call unless retained.
 */
public interface RdmaMessage {

	/** The connection the message came from (for a server: the peer's connection). */
	RdmaConnection connection();

	/** The message's length in bytes. */
	int length();

	/**
	 * The message's bytes: a view of the receive buffer, {@link #length()} bytes long
	 * (read-only). Allocates a small slice object; {@link #buffer()} does not.
	 */
	MemorySegment payload();

	/**
	 * The whole receive buffer (the connection's {@code message-size} bytes), of which
	 * the first {@link #length()} are the message; read-only. No allocation.
	 */
	MemorySegment buffer();

	/**
	 * The message as a read-only {@link ByteBuffer}, position 0 and limit
	 * {@link #length()}; the same object for every message of this buffer (no
	 * allocation), reset before each call.
	 */
	ByteBuffer byteBuffer();

	/** A copy of the message's bytes. */
	byte[] toByteArray();

	/**
	 * Copies {@code length} bytes of the message from {@code offset} into {@code target}
	 * at {@code targetOffset}.
	 */
	void copyTo(long offset, byte[] target, int targetOffset, int length);

	/**
	 * Keeps the buffer after the listener returns: it is posted again on
	 * {@link #release()} only. Call on the listener's thread, during the call.
	 */
	void retain();

	/**
	 * Gives a retained buffer back (posts it again for the next message); any thread,
	 * once per {@link #retain()}.
	 * @throws IllegalStateException when the message is not retained
	 */
	void release();

}
