package dev.rdma.spring.connection.support;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

/**
 * The free send buffers of a {@link PeerConnection}: indexes 0..size-1, taken by senders
 * and given back by the send queue's poller when a send completes. A stack of ints under
 * the pool's monitor. Nothing is allocated, also when a sender waits for a buffer: a
 * stream keeps its send queue full, so waiting is its normal state. A waiting sender
 * parks ({@link LockSupport#parkNanos}) in a ring of waiting threads that a release takes
 * the first of and unparks. (A {@code Condition}'s {@code awaitNanos} allocates a node
 * per wait, 28 bytes per 64 KiB message in the {@code xstream} benchmark; a monitor's
 * {@code wait} allocated 48 bytes per wait in a JVM that had run
 * {@code PeerConnectionTests} before, 0 in a fresh one: not relied upon.)
 */
final class SendBufferPool {

	private final int[] free;

	private int top;

	private boolean closed;

	/** The waiting senders, oldest first: a ring, grown when full (rarely). */
	private @Nullable Thread[] waiters = new Thread[4];

	private int firstWaiter;

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
	int acquire(long nanos) throws InterruptedException {
		long deadline = System.nanoTime() + nanos;
		Thread me = Thread.currentThread();
		while (true) {
			long left;
			synchronized (this) {
				if (closed || top > 0) {
					leave(me);
					return closed ? -1 : free[--top];
				}
				left = deadline - System.nanoTime();
				if (left <= 0) {
					leave(me);
					return -1;
				}
				if (!queued(me)) {
					enqueue(me);
				}
			}
			// a release between the unlock and the park leaves its unpark's permit: the
			// park returns at once
			LockSupport.parkNanos(this, left);
			if (Thread.interrupted()) {
				// a release may have chosen this thread just now: its buffer goes to the
				// next waiter, not left free while that one sleeps on
				@Nullable Thread next;
				synchronized (this) {
					leave(me);
					next = (top > 0) ? dequeue() : null;
				}
				if (next != null) {
					LockSupport.unpark(next);
				}
				throw new InterruptedException();
			}
		}
	}

	void release(int index) {
		@Nullable Thread next;
		synchronized (this) {
			free[top++] = index;
			next = dequeue();
		}
		if (next != null) {
			LockSupport.unpark(next);
		}
	}

	/**
	 * Gives back {@code indexes[0..count)} at once (a completion's reclaimed buffers):
	 * the first waiting sender is unparked once, not once per buffer, and further senders
	 * as long as buffers and waiters remain.
	 */
	void release(int[] indexes, int count) {
		@Nullable Thread next;
		synchronized (this) {
			for (int i = 0; i < count; i++) {
				free[top++] = indexes[i];
			}
			next = dequeue();
			for (int i = 1; i < count && waiting > 0; i++) {
				LockSupport.unpark(dequeue()); // several senders wait: rare
			}
		}
		if (next != null) {
			LockSupport.unpark(next);
		}
	}

	/** Wakes every waiting sender; later acquires fail. */
	synchronized void close() {
		closed = true;
		for (Thread t = dequeue(); t != null; t = dequeue()) {
			LockSupport.unpark(t);
		}
	}

	private boolean queued(Thread t) {
		for (int i = 0; i < waiting; i++) {
			if (waiters[(firstWaiter + i) % waiters.length] == t) {
				return true;
			}
		}
		return false;
	}

	private void enqueue(Thread t) {
		if (waiting == waiters.length) {
			@Nullable Thread[] grown = new Thread[waiters.length * 2];
			for (int i = 0; i < waiting; i++) {
				grown[i] = waiters[(firstWaiter + i) % waiters.length];
			}
			waiters = grown;
			firstWaiter = 0;
		}
		waiters[(firstWaiter + waiting) % waiters.length] = t;
		waiting++;
	}

	private @Nullable Thread dequeue() {
		if (waiting == 0) {
			return null;
		}
		Thread t = waiters[firstWaiter];
		waiters[firstWaiter] = null;
		firstWaiter = (firstWaiter + 1) % waiters.length;
		waiting--;
		return t;
	}

	/**
	 * Takes {@code t} out of the ring when it is still in it (a timeout, an interrupt).
	 */
	private void leave(Thread t) {
		for (int i = 0; i < waiting; i++) {
			int at = (firstWaiter + i) % waiters.length;
			if (waiters[at] == t) {
				// close the gap: the later waiters move one place forward
				for (int j = i; j < waiting - 1; j++) {
					waiters[(firstWaiter + j) % waiters.length] = waiters[(firstWaiter + j + 1) % waiters.length];
				}
				waiters[(firstWaiter + waiting - 1) % waiters.length] = null;
				waiting--;
				return;
			}
		}
	}

	/** Free buffers now. */
	synchronized int available() {
		return top;
	}

	/** Buffers in flight now. */
	synchronized int inFlight() {
		return free.length - top;
	}

	/** Senders waiting in {@link #acquire} now (queued for a buffer). */
	synchronized int waiting() {
		return waiting;
	}

	static long nanos(java.time.Duration d) {
		return TimeUnit.NANOSECONDS.convert(d);
	}

}
