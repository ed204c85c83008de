package dev.rdma.verbs.ffm;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The one lifecycle of every native object of the binding, the verbs'
 * ({@code dev.rdma.verbs.NativeObject}) and the connection manager's
 * ({@code dev.rdma.verbs.cm.CmObject}) alike: a count of the calls in flight, a closing
 * state that refuses new calls, an idempotent and thread-safe {@link #close()} that runs
 * the object's steps in one order (dependants first, wake-ups, a bounded wait for the
 * calls in flight, the destroy), reopens the object when a step refuses, and the
 * process-wide {@link ObjectCounts}.
 *
 * <p>
 * An object holds its lifecycle in a private field and implements the {@link Steps} in a
 * private class of its own, so that no type of this non-exported package shows in the
 * public API.
 */
public final class Lifecycle {

	/** The default bound of {@link #close()}'s wait for calls in flight: 10 s. */
	public static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

	private static final long CLOSING = Long.MIN_VALUE;

	/** The steps of one object's close, called by {@link Lifecycle#close()}. */
	public interface Steps {

		/** A short description for messages, e.g. {@code CompletionQueue[cqe=31]}. */
		String describe();

		/**
		 * Before the close lock: throws when closing now is refused because of what the
		 * calling thread is doing.
		 */
		default void checkCloseAllowedOnThisThread() {
		}

		/**
		 * Under the close lock, while the object is still open (its calls are not refused
		 * yet): throws when the close is refused before anything changes, or does what
		 * must happen while the object still works (a cm event channel closes its ids,
		 * whose waits still read it).
		 */
		default void beforeClosing() {
		}

		/**
		 * Once new calls are refused: closes the object's dependants, before anything
		 * else.
		 */
		default void closeDependants() {
		}

		/** Wakes the threads waiting on the object (they then see it closing). */
		default void beforeClose() {
		}

		/**
		 * True when no call outside the in-flight count is running (a CQ's poll path has
		 * its own).
		 */
		default boolean idle() {
			return true;
		}

		/** How long close() waits for calls in flight. */
		default long closeWaitNanos() {
			return CLOSE_WAIT_NANOS;
		}

		/**
		 * Destroys the native object, after every call in flight has returned; throws
		 * when the native call refuses (the object then stays open).
		 */
		void destroy();

		/**
		 * After a close that failed half way has reopened the object: undoes what
		 * {@link #beforeClose()} did, so that the object is exactly as usable as before.
		 */
		default void closeRefused() {
		}

		/** After a successful close, outside the close lock (an owner forgets it). */
		default void afterClose() {
		}

	}

	/** Number of calls in flight; the sign bit is set while closing or once closed. */
	private final AtomicLong uses = new AtomicLong();

	private final Object closeLock = new Object();

	private final Steps steps;

	private final Class<?> countedAs;

	private volatile boolean closed;

	/**
	 * The lifecycle of a new object, counted in {@link ObjectCounts} as {@code countedAs}
	 * (its class) once {@link #opened()}.
	 */
	public Lifecycle(Class<?> countedAs, Steps steps) {
		this.countedAs = countedAs;
		this.steps = steps;
	}

	/**
	 * Counts the object as opened; its constructor calls this once, when nothing can fail
	 * any more (an object whose owner refused it was never opened). A successful
	 * {@link #close()} counts it as closed.
	 */
	public void opened() {
		ObjectCounts.opened(countedAs);
	}

	/**
	 * Counts an object as closed whose construction failed after {@link #opened()}: it
	 * refuses calls from now on, {@link #close()} does nothing, and no step runs (the
	 * creator destroys the native object itself). Idempotent.
	 */
	public void abandoned() {
		synchronized (closeLock) {
			if (closed) {
				return;
			}
			long s;
			do {
				s = uses.get();
			}
			while (s >= 0 && !uses.compareAndSet(s, s | CLOSING));
			closed = true;
		}
		ObjectCounts.closed(countedAs);
	}

	/** True once {@link #close()} has destroyed the native object. */
	public boolean isClosed() {
		return closed;
	}

	/**
	 * True once close() has started (or finished); a cheap read for paths that do their
	 * own in-flight accounting.
	 */
	public boolean closing() {
		return uses.get() < 0;
	}

	/**
	 * Marks the start of a call that touches native memory; throws
	 * {@link IllegalStateException} when closed or closing.
	 */
	public void acquire() {
		if (!tryAcquire()) {
			throw closedException();
		}
	}

	/**
	 * Marks the start of a call that touches native memory, or returns false (nothing
	 * counted) when closed or closing.
	 */
	public boolean tryAcquire() {
		if (uses.getAndIncrement() < 0) {
			uses.getAndDecrement();
			return false;
		}
		return true;
	}

	/** Marks the end of a call {@link #acquire()} admitted. */
	public void release() {
		uses.getAndDecrement();
	}

	/** Throws {@link IllegalStateException} when closed or closing. */
	public void ensureOpen() {
		if (uses.get() < 0) {
			throw closedException();
		}
	}

	/** "... is closed", naming the object. */
	public IllegalStateException closedException() {
		return new IllegalStateException(steps.describe() + " is closed");
	}

	/**
	 * Closes the object: idempotent and thread-safe. Under the close lock:
	 * {@link Steps#beforeClosing()}, then new calls are refused,
	 * {@link Steps#closeDependants()}, {@link Steps#beforeClose()}, a wait (bounded by
	 * {@link Steps#closeWaitNanos()}) for the calls in flight, {@link Steps#destroy()}.
	 * When any step after the first throws, the object is reopened
	 * ({@link Steps#closeRefused()}) and the exception thrown.
	 * @throws IllegalStateException when a call in flight did not return in time
	 */
	public void close() {
		if (closed) {
			return;
		}
		steps.checkCloseAllowedOnThisThread();
		synchronized (closeLock) {
			if (closed) {
				return;
			}
			steps.beforeClosing();
			long s;
			do {
				s = uses.get();
			}
			while (!uses.compareAndSet(s, s | CLOSING));
			try {
				steps.closeDependants();
				steps.beforeClose();
				awaitIdle();
				steps.destroy();
			}
			catch (RuntimeException | Error e) {
				uses.getAndAdd(-CLOSING); // reopen: clear the sign bit
				steps.closeRefused();
				throw e;
			}
			closed = true;
		}
		steps.afterClose();
		ObjectCounts.closed(countedAs);
	}

	private void awaitIdle() {
		long wait = steps.closeWaitNanos();
		long deadline = System.nanoTime() + wait;
		int spins = 0;
		while ((uses.get() & ~CLOSING) != 0 || !steps.idle()) {
			if (System.nanoTime() - deadline > 0) {
				throw new IllegalStateException(
						"cannot close " + steps.describe() + ": still in use by another thread after "
								+ (wait % 1_000_000_000 == 0 ? wait / 1_000_000_000 + " s" : wait / 1_000_000 + " ms"));
			}
			if (++spins < 100) {
				Thread.onSpinWait();
			}
			else {
				LockSupport.parkNanos(50_000);
			}
		}
	}

}
