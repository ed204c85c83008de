package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

import dev.rdma.spring.connection.SendBuffer;

/**
 * The lending handle of one send buffer of a {@link PeerSends} (one per buffer, made with
 * the connection: nothing allocated per borrow). Its state says whether the application
 * holds the buffer: {@link #send(int)} and {@link #close()} move it from {@link #LENT}
 * with a CAS, so a buffer is sent or given back once per borrow.
 */
final class BorrowedSendBuffer implements SendBuffer {

	/** Not lent: in the pool, or sent and in flight. */
	private static final int IDLE = 0;

	private static final int LENT = 1;

	private final PeerSends sends;

	private final int index;

	private final MemorySegment segment;

	private final AtomicInteger state = new AtomicInteger(IDLE);

	BorrowedSendBuffer(PeerSends sends, int index, MemorySegment segment) {
		this.sends = sends;
		this.index = index;
		this.segment = segment;
	}

	/** Lent to the application (by the thread that took the buffer from the pool). */
	void lend() {
		state.set(LENT);
	}

	PeerSends sends() {
		return sends;
	}

	int index() {
		return index;
	}

	@Override
	public MemorySegment segment() {
		requireLent();
		return segment;
	}

	@Override
	public void send(int length) {
		checkLength(length);
		if (!state.compareAndSet(LENT, IDLE)) {
			throw notLent();
		}
		sends.sendHeld(index, length);
	}

	@Override
	public void write(long remoteOffset, int length) {
		checkLength(length);
		requireLent();
		PeerOneSided part = sends.peer.oneSided();
		// checked while still borrowed: a refusal leaves the buffer with the application
		RemoteRegion region = part.remoteFor("write", remoteOffset, length);
		if (!state.compareAndSet(LENT, IDLE)) {
			throw notLent();
		}
		sends.released();
		part.postWrite(index, length, region, remoteOffset);
	}

	/**
	 * Takes the buffer out of the application's hands for a batch, which sends it
	 * ({@link PeerSendBatch}); it stays held until then.
	 */
	void handOverTo(PeerSends target, int length) {
		if (target != sends) {
			throw new IllegalArgumentException(
					"a send buffer of another connection (or of an earlier connection of this bean) than the batch's");
		}
		checkLength(length);
		if (!state.compareAndSet(LENT, IDLE)) {
			throw notLent();
		}
	}

	@Override
	public void close() {
		if (state.compareAndSet(LENT, IDLE)) {
			sends.giveBack(index);
		}
	}

	private void checkLength(int length) {
		if (length < 0 || length > segment.byteSize()) {
			throw new IllegalArgumentException(
					"a message of " + length + " bytes does not fit in a send buffer of " + segment.byteSize());
		}
	}

	private void requireLent() {
		if (state.get() != LENT) {
			throw notLent();
		}
	}

	private static IllegalStateException notLent() {
		return new IllegalStateException(
				"this send buffer was sent or given back: borrow another (RdmaConnection.borrowSendBuffer)");
	}

	@Override
	public String toString() {
		return "SendBuffer[" + index + ", " + (state.get() == LENT ? "lent" : "not lent") + "]";
	}

}
