package dev.rdma.spring.connection.support;

import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

/**
 * The hand-over of RDMA READ completions from the send queue's poller to the threads
 * waiting in {@link PeerConnection#read}: one slot per send buffer, preallocated (a
 * status and a waiting thread), so that nothing is allocated per READ.
 *
 * <p>
 * A slot's status is {@link #IDLE}, {@link #PENDING} (posted, its reader waits),
 * {@link #ABANDONED} (its reader gave up: the buffer stays in flight until the completion
 * arrives, since the adapter may still write into it) or, once completed, the work
 * completion status (0 = success). The reader publishes itself before it marks the slot
 * pending; the poller sets the status and then unparks the reader it finds.
 */
final class ReadCompletions {

	/** No READ in the slot. */
	static final int IDLE = -3;

	/** A READ posted, its reader waiting. */
	static final int PENDING = -1;

	/** A READ whose reader gave up: its completion frees the buffer. */
	static final int ABANDONED = -2;

	private final AtomicIntegerArray status;

	private final @Nullable Thread[] readers;

	ReadCompletions(int slots) {
		status = new AtomicIntegerArray(slots);
		readers = new Thread[slots];
		for (int i = 0; i < slots; i++) {
			status.set(i, IDLE);
		}
	}

	/** The calling thread is about to post a READ into buffer {@code index}. */
	void begin(int index) {
		readers[index] = Thread.currentThread();
		status.set(index, PENDING);
	}

	/**
	 * The completion status of the READ of buffer {@code index} (0 = success), waiting up
	 * to {@code nanos}; the slot is idle again. Returns {@link #ABANDONED} when the wait
	 * timed out or the thread was interrupted (its interrupt status is kept): then the
	 * buffer belongs to the completion, which {@link #complete} reports.
	 */
	int await(int index, long nanos) {
		long deadline = System.nanoTime() + nanos;
		while (true) {
			int s = status.get(index);
			if (s != PENDING) {
				readers[index] = null;
				status.set(index, IDLE);
				return s;
			}
			long left = deadline - System.nanoTime();
			if (left <= 0 || Thread.currentThread().isInterrupted()) {
				if (status.compareAndSet(index, PENDING, ABANDONED)) {
					return ABANDONED;
				}
				continue; // completed meanwhile
			}
			LockSupport.parkNanos(this, left);
		}
	}

	/**
	 * The completion of the READ of buffer {@code index} arrived with {@code wcStatus}
	 * (on the poller): hands it to the waiting reader. True when the reader had given up,
	 * and the caller frees the buffer.
	 */
	boolean complete(int index, int wcStatus) {
		if (status.getAndSet(index, wcStatus) == ABANDONED) {
			readers[index] = null;
			status.set(index, IDLE);
			return true;
		}
		// read after the status: the reader clears it only once it saw the status
		Thread reader = readers[index];
		if (reader != null) {
			LockSupport.unpark(reader);
		}
		return false;
	}

}
