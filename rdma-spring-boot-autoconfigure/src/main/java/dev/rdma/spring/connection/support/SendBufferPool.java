package dev.rdma.spring.connection.support;

import java.util.concurrent.TimeUnit;

/**
 * The free send buffers of a {@link PeerConnection}: indexes 0..size-1, taken by senders
 * and given back by the send queue's poller when a send completes. A stack of ints under
 * the pool's monitor. Nothing is allocated, also when a sender waits for a buffer: a
 * stream keeps its send queue full, so waiting is its normal state, and a monitor's wait
 * allocates no heap object (a {@code Condition}'s {@code awaitNanos} allocates a node per
 * wait, as a contended {@code ReentrantLock} does per blocked acquire: 28 bytes per 64
 * KiB message in the {@code xstream} benchmark).
 */
final class SendBufferPool {

	private final int[] free;

	private int top;

	private boolean closed;

	/** Senders in {@link #acquire} waiting now (tests: that a wait happened). */
	private int waiting;

	SendBufferPool(int size) {
		free = new int[size];
		for (int i = 0; i < size; i++) {
			free[i] = size - 1 - i;
		}
		top = size;
	}

	/** A free buffer, or -1 at once when none is free. */
	synchronized int tryAcquire() {
		return top == 0 || closed ? -1 : free[--top];
	}

	/**
	 * A free buffer, waiting up to {@code nanos} for one; -1 when none came free or the
	 * pool was closed.
	 */
	synchronized int acquire(long nanos) throws InterruptedException {
		long deadline = System.nanoTime() + nanos;
		while (top == 0 && !closed) {
			long left = deadline - System.nanoTime();
			if (left <= 0) {
				return -1;
			}
			waiting++;
			try {
				// at least 1 ms (wait(0) would be for ever), at most what is left
				wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
			}
			finally {
				waiting--;
			}
		}
		return closed ? -1 : free[--top];
	}

	synchronized void release(int index) {
		free[top++] = index;
		if (waiting > 0) {
			notify();
		}
	}

	/** Wakes every waiting sender; later acquires fail. */
	synchronized void close() {
		closed = true;
		notifyAll();
	}

	/** Free buffers now. */
	synchronized int available() {
		return top;
	}

	/** Buffers in flight now. */
	synchronized int inFlight() {
		return free.length - top;
	}

	/** Senders waiting in {@link #acquire} now. */
	synchronized int waiting() {
		return waiting;
	}

	static long nanos(java.time.Duration d) {
		return TimeUnit.NANOSECONDS.convert(d);
	}

}
