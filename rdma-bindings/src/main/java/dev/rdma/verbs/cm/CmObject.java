package dev.rdma.verbs.cm;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import dev.rdma.verbs.ffm.ObjectCounts;

/**
 * The lifecycle this package shares with {@code dev.rdma.verbs.NativeObject}: counted in
 * {@code NativeObjects}, an in-flight count that close() waits for (at most 10 s), and an
 * idempotent, thread-safe close that wakes waiting threads first.
 */
abstract class CmObject implements AutoCloseable {

	private static final long CLOSING = Long.MIN_VALUE;

	/**
	 * How long close() waits for calls in flight: 10 s. Tests only may shorten it (a
	 * refused close in a test then takes milliseconds).
	 */
	static volatile long closeWaitNanos = TimeUnit.SECONDS.toNanos(10);

	private final AtomicLong uses = new AtomicLong();

	private final Object closeLock = new Object();

	private volatile boolean closed;

	final MemorySegment handle;

	CmObject(MemorySegment handle) {
		this.handle = handle;
		ObjectCounts.opened(getClass());
	}

	/**
	 * The native address ({@code struct rdma_event_channel *},
	 * {@code struct rdma_cm_id *}).
	 */
	public final long address() {
		return handle.address();
	}

	/** True once {@link #close()} has destroyed the native object. */
	public final boolean isClosed() {
		return closed;
	}

	final void acquire() {
		if (uses.getAndIncrement() < 0) {
			uses.getAndDecrement();
			throw new IllegalStateException(describe() + " is closed");
		}
	}

	final void release() {
		uses.getAndDecrement();
	}

	final boolean closing() {
		return uses.get() < 0;
	}

	abstract String describe();

	@Override
	public String toString() {
		return describe() + (closed ? " (closed)" : "");
	}

	/** Closes what depends on this object, before anything else. */
	void closeDependants() {
	}

	/** Wakes the threads waiting on this object (they then see it closing). */
	void beforeClose() {
	}

	/**
	 * Called after a close that failed half way (a call in flight did not return in time,
	 * the destroy threw) has reopened the object: undoes what {@link #beforeClose()} did
	 * that would otherwise keep the object from working (as
	 * {@code NativeObject.closeRefused}).
	 */
	void closeRefused() {
	}

	/** Destroys the native object, after every call in flight has returned. */
	abstract void destroy();

	/**
	 * Idempotent and thread-safe: closes the dependants, wakes waiting threads, waits (at
	 * most 10 s) for calls in flight, then destroys the native object.
	 * @throws IllegalStateException when a call in flight did not return within 10 s (the
	 * object then stays open and usable; its dependants are closed)
	 */
	@Override
	public final void close() {
		synchronized (closeLock) {
			if (closed) {
				return;
			}
			closeDependants();
			long s;
			do {
				s = uses.get();
			}
			while (!uses.compareAndSet(s, s | CLOSING));
			try {
				beforeClose();
				long wait = closeWaitNanos;
				long deadline = System.nanoTime() + wait;
				while ((uses.get() & ~CLOSING) != 0) {
					if (System.nanoTime() - deadline > 0) {
						throw new IllegalStateException("cannot close " + describe()
								+ ": still in use by another thread after "
								+ (wait % 1_000_000_000 == 0 ? wait / 1_000_000_000 + " s" : wait / 1_000_000 + " ms"));
					}
					LockSupport.parkNanos(100_000);
				}
				destroy();
			}
			catch (RuntimeException | Error e) {
				uses.getAndAdd(-CLOSING); // reopen: clear the sign bit
				closeRefused();
				throw e;
			}
			closed = true;
		}
		ObjectCounts.closed(getClass());
	}

}
