package dev.rdma.spring.connection;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * Several messages handed to a connection that go out with one doorbell: one
 * {@code ibv_post_send} of a chain of work requests (IBV_WR_SEND), made by
 * {@link RdmaConnection#newSendBatch()}. Each {@code add} takes a registered send buffer
 * at once (copying the message in, or taking a borrowed {@link SendBuffer} as it is);
 * {@link #send()} posts them all. Reusable: after {@code send()} (or {@link #clear()}) it
 * is empty again; nothing is allocated per message.
 *
 * <p>
 * <b>Ordering.</b> The messages of a batch are posted, and reach the peer, in the order
 * they were added and one after the other: no message of another thread comes between
 * them. Messages of other threads may share the batch's post (a chain holds what is ready
 * when it is posted, see {@link RdmaConnection}).
 *
 * <p>
 * <b>Buffers.</b> A batch holds its buffers from {@code add} to {@code send()}: at most
 * {@code send-depth} messages, fewer while other sends are in flight. An {@code add} that
 * finds no free buffer first sends the messages added before it (one post, as
 * {@link #send()}: with {@code signal-interval} above 1, their completions may be the
 * only ones that can free a buffer), then waits up to {@code send-timeout}, as
 * {@code send} does, and throws {@link SendQueueFullException}. A batch larger than the
 * free buffers therefore goes out in more than one post, each in order.
 *
 * <p>
 * <b>Errors.</b> {@code send()} returns once every message of the batch was posted. When
 * the provider refuses the chain at one element (in practice: the connection is closing),
 * the messages before it were posted and the others were not: it throws
 * {@link SendRefusedException} naming exactly those, which are also counted in
 * {@link ConnectionStatistics#sendsRefused()} and {@code sendErrors}.
 *
 * <p>
 * <b>Threading.</b> Not thread-safe: one batch per sending thread (make it once, reuse
 * it). The connection it adds to is the one its {@link RdmaConnection} sends to when the
 * first message is added (a client's current connection, a server's one peer).
 */
public interface SendBatch {

	/**
	 * Adds {@code length} bytes of {@code data} from {@code offset}, copied into a send
	 * buffer.
	 * @throws IllegalArgumentException when longer than
	 * {@link RdmaConnection#maxMessageSize()}
	 * @throws IllegalStateException when the batch holds {@code send-depth} messages
	 * @throws SendQueueFullException when no send buffer comes free within the send
	 * timeout (the messages added before were sent)
	 * @throws SendRefusedException when no buffer was free and the provider refused some
	 * of the messages added before, sent first (see {@link #send()})
	 * @throws ConnectionNotEstablishedException when not established
	 */
	SendBatch add(byte[] data, int offset, int length);

	/** Adds all of {@code data}; see {@link #add(byte[], int, int)}. */
	default SendBatch add(byte[] data) {
		return add(data, 0, data.length);
	}

	/**
	 * Adds the remaining bytes of {@code data} (its position is not changed); see
	 * {@link #add(byte[], int, int)}.
	 */
	SendBatch add(ByteBuffer data);

	/** Adds the bytes of {@code data}; see {@link #add(byte[], int, int)}. */
	SendBatch add(MemorySegment data);

	/**
	 * Adds the first {@code length} bytes of a borrowed buffer without a copy; the buffer
	 * counts as sent from now on ({@link SendBuffer#send(int)}'s rules).
	 * @throws IllegalArgumentException when {@code buffer} is not a buffer of the batch's
	 * connection, or {@code length} does not fit in it
	 * @throws IllegalStateException when {@code buffer} was sent or given back
	 */
	SendBatch add(SendBuffer buffer, int length);

	/** The messages added since the last {@link #send()} or {@link #clear()}. */
	int size();

	/**
	 * Posts the messages added, as one chain, and empties the batch; nothing when it is
	 * empty.
	 * @throws SendRefusedException when the provider refused some of them (the others
	 * were posted)
	 * @throws ConnectionNotEstablishedException when the connection is no longer
	 * established (nothing was posted; the buffers went back)
	 */
	void send();

	/** Gives the buffers of the messages added back, unsent, and empties the batch. */
	void clear();

}
