package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;

import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;

/**
 * The {@link RdmaMessage} of one receive buffer of a {@link PeerConnection}: made once
 * per buffer and reused for each message that lands in it (no allocation per message). A
 * buffer of a server's {@link SharedReceives} receives from any peer: its connection is
 * set before each listener call ({@link #from}).
 */
final class ReceivedMessage implements RdmaMessage {

	/**
	 * The peer the message came from; written by the receive poller before the listener
	 * call ({@link #from}), read after it or after {@link #retain()} (whose state change
	 * publishes it).
	 */
	private PeerConnection connection;

	private final int index;

	private final MemorySegment buffer;

	private final ByteBuffer byteBuffer;

	private int length;

	private static final int IN_CALL = 0;

	private static final int RETAINED = 1;

	private static final int POSTED = 2;

	/**
	 * IN_CALL during the listener call; RETAINED after {@link #retain()}; POSTED once
	 * whoever gives the buffer back (the poller after the call, or {@link #release()})
	 * won the change: exactly one of them posts it again.
	 */
	private final AtomicInteger state = new AtomicInteger(POSTED);

	/**
	 * The message of buffer {@code index} of a shared receive queue: no peer until its
	 * first {@link #from} (the poller sets it before the message is handed to anyone).
	 */
	ReceivedMessage(int index, MemorySegment buffer) {
		this(null, index, buffer);
	}

	ReceivedMessage(PeerConnection connection, int index, MemorySegment buffer) {
		this.connection = connection;
		this.index = index;
		this.buffer = buffer.asReadOnly();
		this.byteBuffer = buffer.asByteBuffer().asReadOnlyBuffer();
	}

	/** Before the listener call of a shared buffer: the peer it came from. */
	void from(PeerConnection peer) {
		this.connection = peer;
	}

	/** Before the listener call: the message's length, the views reset. */
	void prepare(int length) {
		this.length = length;
		state.set(IN_CALL);
		byteBuffer.limit(length).position(0);
	}

	/**
	 * After the listener call: true when the buffer is to be posted again now (not
	 * retained, nor released meanwhile).
	 */
	boolean returnAfterCall() {
		return state.compareAndSet(IN_CALL, POSTED);
	}

	int index() {
		return index;
	}

	@Override
	public RdmaConnection connection() {
		return connection;
	}

	@Override
	public int length() {
		return length;
	}

	@Override
	public MemorySegment payload() {
		return buffer.asSlice(0, length);
	}

	@Override
	public MemorySegment buffer() {
		return buffer;
	}

	@Override
	public ByteBuffer byteBuffer() {
		return byteBuffer;
	}

	@Override
	public byte[] toByteArray() {
		return buffer.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE);
	}

	@Override
	public void copyTo(long offset, byte[] target, int targetOffset, int length) {
		if (offset < 0 || length < 0 || offset + length > this.length) {
			throw new IndexOutOfBoundsException(
					"offset " + offset + " + length " + length + " outside the " + this.length + "-byte message");
		}
		MemorySegment.copy(buffer, ValueLayout.JAVA_BYTE, offset, target, targetOffset, length);
	}

	@Override
	public void retain() {
		if (!state.compareAndSet(IN_CALL, RETAINED)) {
			throw new IllegalStateException("retain() is for the listener call of " + this + " only");
		}
	}

	@Override
	public void release() {
		if (!state.compareAndSet(RETAINED, POSTED)) {
			throw new IllegalStateException("message of receive buffer " + index + " of " + connection.name()
					+ " is not retained (or was released already)");
		}
		connection.released(index);
	}

	@Override
	public String toString() {
		return "RdmaMessage[" + length + " bytes from " + connection.name() + ", buffer " + index + "]";
	}

}
