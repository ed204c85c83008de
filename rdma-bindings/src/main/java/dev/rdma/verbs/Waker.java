package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Public API for poll loops (the starter's, the benchmarks'): an eventfd that another
 * thread writes to wake a thread blocked in {@link CompletionChannel#await} or
 * {@link CompletionChannel#getEvent(java.time.Duration, Waker)} (in a
 * {@link CompletionChannel.WaitMode#BLOCKING_READ} channel, {@link #wake()} also signals
 * the thread out of its read). {@link #wake()} is thread-safe. One thread at a time waits
 * with a given waker (it carries that thread's scratch memory): a second thread waiting
 * with it at the same time gets {@link IllegalStateException}. {@link #close()} is
 * idempotent and thread-safe: it wakes the thread waiting with this waker and waits (up
 * to 10 s) for its wait to return before it closes the eventfd and frees the memory.
 */
public final class Waker implements AutoCloseable {

	private static final java.lang.invoke.VarHandle WAITER = VarHandles.field(java.lang.invoke.MethodHandles.lookup(),
			"waiter", Thread.class);

	/** The thread waiting with this waker, or null. */
	private volatile @Nullable Thread waiter;

	private volatile boolean closing;

	private volatile boolean pending;

	private volatile @Nullable BlockingRead reader;

	private final Arena arena = Arena.ofShared();

	private final MemorySegment one = Native.unscoped(arena.allocate(JAVA_LONG));

	private final MemorySegment scratch = Native.unscoped(arena.allocate(JAVA_LONG));

	private final MemorySegment capture = Native.unscoped(Native.allocateCapture(arena));

	/**
	 * Scratch of the thread that waits with this waker: pollfd[3] and a capture segment,
	 * so a wait allocates nothing.
	 */
	final MemorySegment pollFds = Native.unscoped(arena.allocate(Layouts.POLLFD, 3));

	final MemorySegment pollCapture = Native.unscoped(Native.allocateCapture(arena));

	private volatile int fd;

	public Waker() {
		int f = Libc.eventfd();
		if (f < 0) {
			arena.close();
			throw new VerbsException("eventfd", -f, "a waker");
		}
		this.fd = f;
		one.set(JAVA_LONG, 0, 1L);
	}

	int fd() {
		int f = fd;
		if (f < 0) {
			throw new IllegalStateException("waker is closed");
		}
		return f;
	}

	/** Wakes the thread waiting on this waker (or the next one to wait). */
	public synchronized void wake() {
		if (fd >= 0) {
			pending = true;
			Libc.write8(fd, one, capture);
			BlockingRead r = reader;
			if (r != null) {
				r.interrupt();
			}
		}
	}

	/**
	 * True after {@link #wake()} until {@link #clear()}: what a blocking read checks
	 * (without a system call) before it reads.
	 */
	boolean pending() {
		return pending;
	}

	/**
	 * The blocking read the claiming thread is in: {@link #wake()} signals it. Set before
	 * {@link #pending()} is checked.
	 */
	void attach(BlockingRead read) {
		reader = read;
	}

	void detach() {
		reader = null;
	}

	/**
	 * Claims the waker for a wait of the current thread (its poll(2) uses
	 * {@link #pollFds}); see the class comment.
	 */
	void claim() {
		if (!WAITER.compareAndSet(this, null, Thread.currentThread())) {
			Thread other = waiter;
			throw new IllegalStateException(closing ? "waker is closed" : "waker is already used by a wait of thread '"
					+ (other == null ? "?" : other.getName()) + "': one waiting thread per waker");
		}
		if (closing) {
			WAITER.setRelease(this, null);
			throw new IllegalStateException("waker is closed");
		}
	}

	void unclaim() {
		WAITER.setRelease(this, null);
	}

	/** Consumes pending wake-ups. */
	synchronized void clear() {
		if (fd >= 0) {
			pending = false;
			Libc.read8(fd, scratch, capture);
		}
	}

	@Override
	public void close() {
		synchronized (this) {
			if (fd < 0) {
				return;
			}
			closing = true; // volatile write, then volatile reads of waiter: one of
							// claim() and close() sees the other
		}
		long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
		while (waiter != null) { // not under the lock: the waiting thread takes it in
									// clear()
			wake();
			if (System.nanoTime() - deadline > 0) {
				Thread w = waiter;
				closing = false;
				throw new IllegalStateException("cannot close the waker: a wait of thread '"
						+ (w == null ? "?" : w.getName()) + "' did not return within 10 s");
			}
			java.util.concurrent.locks.LockSupport.parkNanos(50_000);
		}
		synchronized (this) {
			int f = fd;
			if (f >= 0) {
				fd = -1;
				Libc.close(f);
				arena.close();
			}
		}
	}

}
