package dev.rdma.verbs;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import dev.rdma.verbs.ffm.Libc;
import org.jspecify.annotations.Nullable;

/**
 * One thread blocked in {@code read(2)} on a blocking fd, and the means for other threads
 * to end that read: the JDK's own technique for NIO channels. The reader marks itself
 * {@link #begin reading}, checks whether it should stop, and reads; a thread that wants
 * it out ({@link #interrupt()}: a {@link Waker}, a close) or {@link Watchdog} (the
 * timeout) sends it {@link Libc#JDK_INTERRUPT_SIGNAL}, whose JDK handler is a no-op
 * installed without {@code SA_RESTART}, so the read fails with EINTR and the reader looks
 * again at why. A signal that lands before the read starts is repeated every millisecond
 * by the watchdog until the reader has {@link #end ended}.
 *
 * <p>
 * A signal is sent only while the state is {@code SIGNALLING}, and the reader cannot
 * leave its read while it is: so {@code pthread_kill} never targets a thread that has
 * ended. The wait costs the reader no system call beyond its read (C's cost), and no
 * allocation; the watchdog wakes once per timeout, not per read.
 *
 * <p>
 * {@link #checkSignalHandler()} verifies that the JDK's handler is installed before any
 * signal is sent (a real-time signal without a handler ends the process).
 */
final class BlockingRead {

	private static final int IDLE = 0;

	private static final int READING = 1;

	private static final int SIGNALLING = 2;

	private static final VarHandle STATE = VarHandles.field(MethodHandles.lookup(), "state", int.class);

	@SuppressWarnings("unused") // through STATE
	private volatile int state;

	/** The reading thread's pthread_t, valid while the state is not IDLE. */
	private volatile long pthread;

	/**
	 * {@link Thread#threadId()} of the platform thread whose pthread_t {@link #pthread}
	 * holds, or -1 (none, or a virtual thread). Written and read by readers only, which
	 * take turns (one at a time, with a happens-before edge between them).
	 */
	private long pthreadOwner = -1;

	/** System.nanoTime() deadline of the current read. */
	private volatile long deadline;

	/** Set by {@link #interrupt()}, cleared by {@link #begin}. */
	private volatile boolean interrupted;

	private final String what;

	BlockingRead(String what) {
		this.what = what;
	}

	/**
	 * Verifies that the JDK's no-op handler for {@link Libc#JDK_INTERRUPT_SIGNAL} is
	 * installed without {@code SA_RESTART}, first letting the JDK install it (it does so
	 * when NIO's {@code NativeThread} is initialised).
	 * @throws UnsupportedOperationException when it is not
	 */
	static void checkSignalHandler() {
		String problem = signalHandlerProblem();
		if (problem != null) {
			try {
				Class.forName("sun.nio.ch.NativeThread", true, ClassLoader.getPlatformClassLoader());
			}
			catch (ClassNotFoundException | LinkageError e) {
				// fall through to the check, which names the problem
			}
			problem = signalHandlerProblem();
		}
		if (problem != null) {
			throw new UnsupportedOperationException("a blocking read cannot be interrupted: signal "
					+ Libc.JDK_INTERRUPT_SIGNAL + " (the JDK's I/O interrupt signal, SIGRTMAX-2) " + problem);
		}
	}

	private static @Nullable String signalHandlerProblem() {
		int[] errno = new int[1];
		long[] action = Libc.sigactionOf(Libc.JDK_INTERRUPT_SIGNAL, errno);
		if (action == null) {
			return "cannot be queried: sigaction: " + Errno.describe(errno[0]);
		}
		if (action[0] == Libc.SIG_DFL || action[0] == Libc.SIG_IGN) {
			return "has no handler (" + (action[0] == Libc.SIG_DFL ? "SIG_DFL" : "SIG_IGN") + ")";
		}
		if ((action[1] & Libc.SA_RESTART) != 0) {
			return "has a handler with SA_RESTART, which restarts the read instead of ending it";
		}
		return null;
	}

	/**
	 * Marks the calling thread as about to read until {@code deadline}
	 * ({@link System#nanoTime()}). The caller then checks its stop conditions (they are
	 * published before a signaller looks at the state) and reads, and calls {@link #end}
	 * in every case.
	 */
	void begin(long deadline) {
		// A platform thread keeps its pthread_t: asked once per thread (a downcall
		// per event costs the event loop a measurable share:
		// docs/benchmarks-history.md, run 8).
		// A virtual thread is asked every time: it may run on another carrier than last
		// time (it cannot move between here and its read: nothing in between blocks,
		// and the native read pins it to its carrier). Thread ids are never reused.
		Thread me = Thread.currentThread();
		long id = me.isVirtual() ? -1 : me.threadId();
		if (id == -1 || id != this.pthreadOwner) {
			this.pthread = Libc.pthreadSelf();
			this.pthreadOwner = id;
		}
		this.deadline = deadline;
		this.interrupted = false;
		STATE.setVolatile(this, READING);
		Watchdog.INSTANCE.reading(this, deadline);
	}

	/** True after {@link #interrupt()} since {@link #begin}. */
	boolean interrupted() {
		return interrupted;
	}

	/** Leaves the read: waits out a signal being sent (microseconds). */
	void end() {
		while (!STATE.compareAndSet(this, READING, IDLE)) {
			Thread.onSpinWait();
		}
	}

	/**
	 * Makes the current (or next) read end: the reader sees {@link #interrupted()} before
	 * it reads, or its read fails with EINTR. Thread-safe; returns at once.
	 */
	void interrupt() {
		interrupted = true;
		if (signal()) {
			Watchdog.INSTANCE.repeat();
		}
	}

	/** True while a read is under way. */
	boolean reading() {
		return (int) STATE.getVolatile(this) != IDLE;
	}

	/**
	 * Sends the signal if a read is under way; returns whether it was (the caller repeats
	 * the signal while it is: it may have landed before the read started).
	 */
	private boolean signal() {
		if (!STATE.compareAndSet(this, READING, SIGNALLING)) {
			return (int) STATE.getVolatile(this) != IDLE;
		}
		try {
			int rc = Libc.pthreadKill(pthread, Libc.JDK_INTERRUPT_SIGNAL);
			if (rc != 0) {
				throw new IllegalStateException(
						"pthread_kill of the thread reading " + what + ": " + Errno.describe(rc));
			}
		}
		finally {
			STATE.setVolatile(this, READING);
		}
		return true;
	}

	/** Signals this read if it should end now: returns whether it must be repeated. */
	private boolean signalIfDue(long now) {
		if ((int) STATE.getVolatile(this) == IDLE) {
			return false;
		}
		if (interrupted || now - deadline >= 0) {
			return signal();
		}
		return false;
	}

	void register() {
		Watchdog.INSTANCE.add(this);
	}

	void unregister() {
		Watchdog.INSTANCE.remove(this);
	}

	@Override
	public String toString() {
		return "BlockingRead[" + what + "]";
	}

	/**
	 * The one thread that ends timed-out reads and repeats interrupt signals: it sleeps
	 * until the earliest deadline among the reads under way (a new read wakes it only
	 * when its deadline is earlier than that, or when nothing was under way), and every
	 * millisecond while a signalled read has not ended yet. With a steady timeout it
	 * wakes about once per timeout, not per read. Started with the first registered read;
	 * a daemon.
	 */
	static final class Watchdog implements Runnable {

		static final Watchdog INSTANCE = new Watchdog();

		private static final long REPEAT_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

		private final CopyOnWriteArrayList<BlockingRead> reads = new CopyOnWriteArrayList<>();

		/**
		 * When the watchdog wakes next (nanoTime), or Long.MAX_VALUE when parked idle.
		 */
		private volatile long wakeAt = Long.MAX_VALUE;

		private volatile @Nullable Thread thread;

		synchronized void add(BlockingRead r) {
			reads.add(r);
			if (thread == null) {
				Thread t = Thread.ofPlatform().daemon().name("rdma-blocking-read-watchdog").unstarted(this);
				thread = t;
				t.start();
			}
		}

		void remove(BlockingRead r) {
			reads.remove(r);
		}

		/**
		 * A read began with {@code deadline}: wakes the watchdog if it sleeps past it.
		 */
		void reading(BlockingRead r, long deadline) {
			long w = wakeAt;
			if (w == Long.MAX_VALUE || deadline - w < 0) {
				unpark();
			}
		}

		/** A signal was sent: the watchdog repeats it until the read has ended. */
		void repeat() {
			unpark();
		}

		private void unpark() {
			Thread t = thread;
			if (t != null) {
				LockSupport.unpark(t);
			}
		}

		@Override
		public void run() {
			while (true) {
				long now = System.nanoTime();
				long next = scan(now);
				wakeAt = next;
				// A read that began during the scan and read the old wakeAt: seen here,
				// or it saw the new wakeAt and unparked us.
				long again = scan(System.nanoTime());
				if (next == Long.MAX_VALUE || (again != Long.MAX_VALUE && again - next < 0)) {
					next = again;
					wakeAt = next;
				}
				if (next == Long.MAX_VALUE) {
					LockSupport.park(this);
					continue;
				}
				long sleep = next - System.nanoTime();
				if (sleep > 0) {
					LockSupport.parkNanos(this, sleep);
				}
			}
		}

		/** Signals what is due; returns when to look again. */
		private long scan(long now) {
			// Relative comparisons only: nanoTime and deadlines may wrap. Nothing under
			// way: park until a read begins (it unparks the watchdog then).
			long next = Long.MAX_VALUE;
			for (BlockingRead r : reads) {
				try {
					if (r.signalIfDue(now)) {
						next = now + REPEAT_NANOS;
					}
					else if (r.reading()) {
						long d = r.deadline;
						if (next == Long.MAX_VALUE || d - next < 0) {
							next = d;
						}
					}
				}
				catch (RuntimeException e) {
					// pthread_kill refused (cannot happen for a live thread): the reader
					// still ends at its next check of interrupted(); look again later
				}
			}
			return next;
		}

	}

}
