package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import dev.rdma.verbs.ffm.Libc;

/**
 * Mutual exclusion for the poll path: at most one thread holds the slot; another thread
 * waits for it in Java (bounded, where safepoints reach it); the holder entering again is
 * refused. Used by {@link CompletionQueue} (one poll, resize or iterator batch at a time)
 * and {@link WorkCompletionBuffer} (one poll filling it at a time).
 *
 * <p>
 * <b>Biased to its usual thread.</b> A CQ and its buffer are normally used by one thread
 * for their whole life, and a compare-and-set per poll (two: the CQ's and the buffer's)
 * costs about as much as the poll of an empty CQ (docs/benchmarks.md). So the first
 * thread to enter becomes the slot's <em>owner</em> (one CAS, once) and from then on
 * enters and leaves with an opaque store of its mark and a plain read of
 * {@link #revoked}: no atomic update, no fence. Anyone else - another thread that wants
 * the slot, or a close - first <em>revokes</em> the bias: it sets {@link #revoked}, calls
 * {@code membarrier(2)} (every running thread of the process passes a full barrier), and
 * waits for the owner's mark to clear. That is the asymmetric Dekker pattern of userspace
 * RCU: after the barrier, either the owner has seen {@code revoked} and backs off, or the
 * revoker sees the owner's mark and waits. Revoked once, the slot stays in its plain
 * mode: every enter is a CAS on {@link #holder}, every exit a release store. Without
 * membarrier in the kernel the slot starts in that mode.
 *
 * <p>
 * <b>A waiter goes next.</b> A thread that polls in a loop gives the slot back for a few
 * instructions before it takes it again; a waiter that parks between its tries would see
 * it free only by luck (under emulation, where a parked thread wakes rarely, a waiter
 * gave up after 10 s behind short polls). So the first thread to wait queues itself in
 * {@link #next}, and no other thread takes the free slot before it: the waiter waits for
 * the hold in progress, and the 10 s bound fails only on a hold that really lasts.
 */
final class ExclusiveSlot {

	private static final VarHandle OWNER;

	private static final VarHandle OWNER_MARK;

	private static final VarHandle HOLDER;

	private static final VarHandle NEXT;

	/**
	 * How long a thread waits for the slot (and a revoker for the owner's mark) before it
	 * gives up.
	 */
	static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

	/** The holder of a slot that was {@link #close() closed}. */
	private static final Thread CLOSED = new Thread("closed");

	static {
		try {
			MethodHandles.Lookup lookup = MethodHandles.lookup();
			OWNER = lookup.findVarHandle(ExclusiveSlot.class, "owner", Thread.class);
			OWNER_MARK = lookup.findVarHandle(ExclusiveSlot.class, "ownerMark", boolean.class);
			HOLDER = lookup.findVarHandle(ExclusiveSlot.class, "holder", Thread.class);
			NEXT = lookup.findVarHandle(ExclusiveSlot.class, "next", Thread.class);
		}
		catch (ReflectiveOperationException e) {
			throw new ExceptionInInitializerError(e);
		}
	}

	/**
	 * The thread the slot is biased to, or null (not yet used, or never biased). Set
	 * once.
	 */
	private volatile @Nullable Thread owner;

	/**
	 * True while the owner holds the slot through the bias; written by the owner only.
	 */
	private boolean ownerMark;

	/**
	 * Set once by the first thread other than the owner (or a close); after it,
	 * {@link #holder} rules.
	 */
	private volatile boolean revoked = !Libc.MEMBARRIER;

	/** The holder in the plain (revoked) mode, {@link #CLOSED}, or null. */
	private volatile @Nullable Thread holder;

	/**
	 * The thread that waits for the slot and takes it before anyone else when it comes
	 * free (a waiting enter or close), or null.
	 */
	private volatile @Nullable Thread next;

	/**
	 * Takes the slot for the current thread: at once when free, after waiting (at most
	 * {@link #WAIT_NANOS}) when another thread holds it.
	 * @param what the operation, for the messages
	 * @param describe the object, for the messages
	 * @param wait true: wait for another thread's hold to end; false: refuse at once
	 * @return false when the slot was {@linkplain #close(String, Object) closed} (nothing
	 * held then)
	 * @throws IllegalStateException when the current thread holds the slot already, when
	 * another thread holds it and {@code wait} is false, or when it stays busy for 10 s
	 */
	boolean enter(String what, Object describe, boolean wait) {
		Thread me = Thread.currentThread();
		if (owner == me && !ownerMark) {
			OWNER_MARK.setOpaque(this, true);
			if (!revoked) { // a plain read after the opaque store: membarrier on the
							// revoker's side orders them
				return true;
			}
			OWNER_MARK.setRelease(this, false);
		}
		return enterSlow(me, what, describe, wait);
	}

	/** Gives the slot back; only by the thread that {@linkplain #enter entered} it. */
	void exit() {
		if (ownerMark && owner == Thread.currentThread()) {
			OWNER_MARK.setRelease(this, false);
		}
		else {
			HOLDER.setRelease(this, null);
		}
	}

	/** True when the current thread holds the slot. */
	boolean heldByCurrentThread() {
		Thread me = Thread.currentThread();
		return (owner == me && ownerMark) || holder == me;
	}

	/**
	 * True when no thread holds the slot (the owner's mark read as volatile: after a
	 * revocation it is exact).
	 */
	boolean isFree() {
		return !(boolean) OWNER_MARK.getVolatile(this) && (holder == null || holder == CLOSED);
	}

	/** The thread holding the slot, or null; for messages. */
	@Nullable Thread holder() {
		Thread h = holder;
		if (h != null && h != CLOSED) {
			return h;
		}
		return (boolean) OWNER_MARK.getVolatile(this) ? owner : null;
	}

	/**
	 * Ends the bias (see the class comment) so that every later enter is exact and
	 * visible to other threads. Idempotent; costs one membarrier(2) the first time.
	 * Called by the first other thread and by close paths.
	 */
	void revoke() {
		if (!revoked) {
			synchronized (this) {
				if (!revoked) {
					revoked = true;
					if (owner != null) {
						Libc.membarrier();
					}
				}
			}
		}
	}

	/**
	 * Closes the slot: waits (at most {@link #WAIT_NANOS}) until no thread holds it, then
	 * every later {@link #enter} returns false. Idempotent.
	 * @throws IllegalStateException when the current thread holds it, or another thread
	 * keeps it for 10 s
	 */
	void close(String what, Object describe) {
		revoke();
		Thread me = Thread.currentThread();
		if (heldByCurrentThread()) {
			throw new IllegalStateException("cannot " + what + " " + describe + " from inside a poll that holds it");
		}
		long deadline = System.nanoTime() + WAIT_NANOS;
		int spins = 0;
		boolean queued = false;
		try {
			while (true) {
				if (holder == CLOSED || tryTake(me, CLOSED)) {
					return;
				}
				queued = queued || queue(me);
				spins = pause(spins, deadline, what, describe, me);
			}
		}
		finally {
			if (queued) {
				unqueue(me);
			}
		}
	}

	boolean isClosed() {
		return holder == CLOSED;
	}

	/** The thread queued to take the slot next, or null; for tests and messages. */
	@Nullable Thread waiter() {
		return next;
	}

	/**
	 * One try to take the free slot for {@code taker} ({@code me}, or {@link #CLOSED}):
	 * only when nobody is queued before {@code me}.
	 */
	private boolean tryTake(Thread me, Thread taker) {
		Thread first = next;
		return holder == null && (first == null || first == me) && !(boolean) OWNER_MARK.getVolatile(this)
				&& HOLDER.compareAndSet(this, null, taker);
	}

	/** Queues {@code me} as the next taker unless another thread is queued. */
	private boolean queue(Thread me) {
		return next == null && NEXT.compareAndSet(this, null, me);
	}

	private void unqueue(Thread me) {
		NEXT.compareAndSet(this, me, null);
	}

	private boolean enterSlow(Thread me, String what, Object describe, boolean wait) {
		if (heldByCurrentThread()) {
			throw new IllegalStateException(what + " on " + describe + " from inside its own poll (a handler, or "
					+ "between startPoll() and endPoll()) is refused: it runs one poll at a time, and the first one "
					+ "is not finished");
		}
		if (!revoked && owner == null && OWNER.compareAndSet(this, null, me)) {
			// first use: biased to this thread (re-enter through the fast path, which
			// re-checks revoked)
			return enter(what, describe, wait);
		}
		revoke();
		long deadline = System.nanoTime() + WAIT_NANOS;
		int spins = 0;
		boolean queued = false;
		try {
			while (true) {
				if (holder == CLOSED) {
					return false;
				}
				if (tryTake(me, me)) {
					// the owner may have set its mark between the read and the CAS only
					// if
					// it missed `revoked`, which the membarrier of revoke() excludes; it
					// backs off (and takes the CAS path) otherwise
					return true;
				}
				if (!wait) {
					Thread other = holder();
					other = other == null ? next : other;
					throw new IllegalStateException(what + " on " + describe + " is refused: a poll on thread '"
							+ (other == null ? "?" : other.getName()) + "' is using it (one per polling thread)");
				}
				queued = queued || queue(me);
				spins = pause(spins, deadline, what, describe, me);
			}
		}
		finally {
			if (queued) {
				unqueue(me);
			}
		}
	}

	private int pause(int spins, long deadline, String what, Object describe, Thread me) {
		if (System.nanoTime() - deadline > 0) {
			Thread h = holder();
			throw new IllegalStateException(what + " on " + describe + " gave up after 10 s: it is busy in a poll of "
					+ "thread '" + (h == null ? "?" : h.getName()) + "' (a handler that never returns, or a "
					+ "startPoll() without endPoll())");
		}
		if (spins < 100) {
			Thread.onSpinWait();
		}
		else {
			LockSupport.parkNanos(20_000);
		}
		return spins + 1;
	}

}
