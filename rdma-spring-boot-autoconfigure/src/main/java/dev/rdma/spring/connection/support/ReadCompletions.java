package dev.rdma.spring.connection.support;

import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * The hand-over of RDMA READ completions from the send queue's poller to the threads
 * waiting in {@link PeerConnection#read}: one slot per send buffer, preallocated (a
 * status and a waiting thread), so that nothing is allocated per READ.
 *
 * <p>
 * A slot's status is {@link #IDLE}, {@link #PENDING} (posted, its reader waits),
 * {@link #ABANDONED} (its reader gave up: the buffer stays in flight until the completion
 * arrives, since the adapter may still write into it) or, once completed, the work
 * completion status (0 = success). A reader publishes itself as the slot's waiter only
 * while it waits for that slot, then reads the status again before it parks; the poller
 * sets the status and then unparks the waiter it finds (both volatile: one of the two
 * sees the other). So a reader waiting for the last of several READs in flight is woken
 * once, by that READ, not by each one before it.
 */
final class ReadCompletions {

	/** No READ in the slot. */
	static final int IDLE = -3;

	/** A READ posted, its reader waiting. */
	static final int PENDING = -1;

	/** A READ whose reader gave up: its completion frees the buffer. */
	static final int ABANDONED = -2;

	private final AtomicIntegerArray status;

	/** Per slot: the thread waiting for it now, or null. */
	private final AtomicReferenceArray<Thread> waiters;

	ReadCompletions(int slots) {
		status = new AtomicIntegerArray(slots);
		waiters = new AtomicReferenceArray<>(slots);
		for (int i = 0; i < slots; i++) {
			status.set(i, IDLE);
		}
	}

	/** The calling thread is about to post a READ into buffer {@code index}. */
	void begin(int index) {
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
				waiters.set(index, null);
				status.set(index, IDLE);
				return s;
			}
			long left = deadline - System.nanoTime();
			if (left <= 0 || Thread.currentThread().isInterrupted()) {
				if (status.compareAndSet(index, PENDING, ABANDONED)) {
					waiters.set(index, null);
					return ABANDONED;
				}
				continue; // completed meanwhile
			}
			park(index, left);
		}
	}

	/**
	 * Waits until the READ of buffer {@code index} completed (or was abandoned), or until
	 * {@code deadline} ({@link System#nanoTime()}) or an interrupt; leaves the status for
	 * {@link #await}.
	 */
	void awaitDone(int index, long deadline) {
		while (status.get(index) == PENDING) {
			long left = deadline - System.nanoTime();
			if (left <= 0 || Thread.currentThread().isInterrupted()) {
				break;
			}
			park(index, left);
		}
		waiters.set(index, null);
	}

	/**
	 * Parks up to {@code nanos} as the waiter of slot {@code index}, unless its status
	 * changed once the waiter was published.
	 */
	private void park(int index, long nanos) {
		waiters.set(index, Thread.currentThread());
		if (status.get(index) == PENDING) {
			LockSupport.parkNanos(this, nanos);
		}
	}

	/**
	 * The completion of the READ of buffer {@code index} arrived with {@code wcStatus}
	 * (on the poller): hands it to the waiting reader. True when the reader had given up,
	 * and the caller frees the buffer.
	 */
	boolean complete(int index, int wcStatus) {
		if (status.getAndSet(index, wcStatus) == ABANDONED) {
			status.set(index, IDLE);
			return true;
		}
		// read after the status: a waiter published before it is seen here; one
		// published after it sees the status before parking
		Thread waiter = waiters.get(index);
		if (waiter != null) {
			LockSupport.unpark(waiter);
		}
		return false;
	}

}
