package dev.rdma.spring.connection.support;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The free send buffers of a {@link PeerConnection}: indexes 0..size-1, taken by senders
 * and given back by the send queue's poller when a send completes. A stack of ints under
 * a lock: nothing allocated unless a sender has to wait.
 */
final class SendBufferPool {

	private final int[] free;

	private int top;

	private final ReentrantLock lock = new ReentrantLock();

	private final Condition available = lock.newCondition();

	private boolean closed;

	SendBufferPool(int size) {
		free = new int[size];
		for (int i = 0; i < size; i++) {
			free[i] = size - 1 - i;
		}
		top = size;
	}

	/** A free buffer, or -1 at once when none is free. */
	int tryAcquire() {
		lock.lock();
		try {
			return top == 0 || closed ? -1 : free[--top];
		}
		finally {
			lock.unlock();
		}
	}

	/**
	 * A free buffer, waiting up to {@code nanos} for one; -1 when none came free or the
	 * pool was closed.
	 */
	int acquire(long nanos) throws InterruptedException {
		lock.lock();
		try {
			while (top == 0 && !closed) {
				if (nanos <= 0) {
					return -1;
				}
				nanos = available.awaitNanos(nanos);
			}
			return closed ? -1 : free[--top];
		}
		finally {
			lock.unlock();
		}
	}

	void release(int index) {
		lock.lock();
		try {
			free[top++] = index;
			available.signal();
		}
		finally {
			lock.unlock();
		}
	}

	/** Wakes every waiting sender; later acquires fail. */
	void close() {
		lock.lock();
		try {
			closed = true;
			available.signalAll();
		}
		finally {
			lock.unlock();
		}
	}

	/** Free buffers now. */
	int available() {
		lock.lock();
		try {
			return top;
		}
		finally {
			lock.unlock();
		}
	}

	/** Buffers in flight now. */
	int inFlight() {
		lock.lock();
		try {
			return free.length - top;
		}
		finally {
			lock.unlock();
		}
	}

	static long nanos(java.time.Duration d) {
		return TimeUnit.NANOSECONDS.convert(d);
	}

}
