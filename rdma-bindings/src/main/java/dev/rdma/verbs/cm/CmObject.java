package dev.rdma.verbs.cm;

import java.lang.foreign.MemorySegment;

import dev.rdma.verbs.ffm.Lifecycle;

/**
 * The connection manager's native objects: the lifecycle of
 * {@code dev.rdma.verbs.NativeObject} (the same {@link Lifecycle}: counted in
 * {@code NativeObjects}, an in-flight count that close() waits for, at most 10 s, and an
 * idempotent, thread-safe close that wakes waiting threads first), with the hooks this
 * package needs. Unlike a verbs object, a cm object closes its dependants while it is
 * still open: an event channel's ids still read it while they close.
 */
abstract class CmObject implements AutoCloseable {

	/**
	 * How long close() waits for calls in flight: 10 s. Tests only may shorten it (a
	 * refused close in a test then takes milliseconds).
	 */
	static volatile long closeWaitNanos = Lifecycle.CLOSE_WAIT_NANOS;

	private final Lifecycle lifecycle = new Lifecycle(getClass(), new Steps());

	final MemorySegment handle;

	CmObject(MemorySegment handle) {
		this.handle = handle;
		lifecycle.opened();
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
		return lifecycle.isClosed();
	}

	final void acquire() {
		lifecycle.acquire();
	}

	final void release() {
		lifecycle.release();
	}

	final boolean closing() {
		return lifecycle.closing();
	}

	abstract String describe();

	@Override
	public String toString() {
		return describe() + (isClosed() ? " (closed)" : "");
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
		lifecycle.close();
	}

	/** The lifecycle's steps: this object's hooks. */
	private final class Steps implements Lifecycle.Steps {

		@Override
		public String describe() {
			return CmObject.this.describe();
		}

		@Override
		public void beforeClosing() {
			// while still open: the dependants' waits and closes use this object
			closeDependants();
		}

		@Override
		public void beforeClose() {
			CmObject.this.beforeClose();
		}

		@Override
		public long closeWaitNanos() {
			return closeWaitNanos;
		}

		@Override
		public void destroy() {
			CmObject.this.destroy();
		}

		@Override
		public void closeRefused() {
			CmObject.this.closeRefused();
		}

	}

}
