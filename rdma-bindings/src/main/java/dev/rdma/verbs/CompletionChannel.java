package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A completion event channel ({@code struct ibv_comp_channel *},
 * {@code ibv_create_comp_channel}).
 *
 * <p>
 * Its fd is put in non-blocking mode at creation, so that no thread ever blocks inside
 * {@code read(2)}: {@link #await} waits with {@code poll(2)} on the channel fd and on a
 * {@link Waker} that another thread can signal, and {@link #getEvent()} calls
 * {@code ibv_get_cq_event}, which then returns at once. Several CQs may share a channel:
 * each event names the CQ that fired, and {@link #getEvent()} returns that CQ with its
 * got-count incremented; the caller acknowledges it with
 * {@link CompletionQueue#ackEvents()}.
 *
 * <p>
 * That is {@link WaitMode#POLL}, the default. {@link WaitMode#BLOCKING_READ} (chosen at
 * creation: {@link Context#createCompletionChannel(WaitMode)}) leaves the fd blocking, as
 * C programs do, so that {@link #getEvent(Duration, Waker)} sleeps in the one
 * {@code read(2)} of {@code ibv_get_cq_event}: one system call per event instead of three
 * when the event is not there yet. Its timeout, {@link Waker#wake()} and {@link #close()}
 * still end that read, by signalling the reading thread.
 *
 * <p>
 * Thread-safe. {@link #close()} ({@code ibv_destroy_comp_channel}) fails with EBUSY while
 * a CQ still uses the channel (for EFA CQs, which libibverbs does not count, this binding
 * refuses it itself).
 */
public final class CompletionChannel extends NativeObject {

	/** Outcome of {@link #await}. */
	public enum WaitResult {

		/** The channel fd is readable: call {@link #getEvent()}. */
		READY,
		/** The caller's waker was signalled. */
		WOKEN,
		/** The timeout passed. */
		TIMEOUT

	}

	/**
	 * How a thread waits for an event: chosen at creation
	 * ({@link Context#createCompletionChannel(WaitMode)}).
	 */
	public enum WaitMode {

		/**
		 * The default. The fd is non-blocking. {@link #getEvent(Duration, Waker)} reads,
		 * and when nothing is pending waits with {@code poll(2)} on the fd, the caller's
		 * {@link Waker} and the channel's close, then reads again (three system calls for
		 * an event that was not there yet, one for a pending one). Any number of threads
		 * may get events at once.
		 */
		POLL,

		/**
		 * The fd stays blocking and {@link #getEvent(Duration, Waker)} sleeps in the one
		 * {@code read(2)} of {@code ibv_get_cq_event}, as {@code ibv_rc_pingpong -e}
		 * does: one system call per event. The timeout, {@link Waker#wake()}, the
		 * channel's {@link #close()} and the close of one of its CQs end that read by
		 * sending the reading thread the JDK's own I/O interrupt signal
		 * ({@code SIGRTMAX-2}, whose no-op handler the JDK installs without
		 * {@code SA_RESTART}; creation checks it with {@code sigaction} and refuses the
		 * mode without it). A timeout ends within about a millisecond of its deadline.
		 * One thread at a time gets events ({@link #getEvent()} and
		 * {@link #getEvent(Duration, Waker)}): a second one meanwhile gets
		 * {@link IllegalStateException}. {@link #await} keeps working (it only polls).
		 */
		BLOCKING_READ

	}

	private final Arena arena = Arena.ofShared();

	private final Context context;

	private final int fd;

	private final WaitMode waitMode;

	/** The read of a {@link WaitMode#BLOCKING_READ} channel; null for POLL. */
	private final @Nullable BlockingRead blocking;

	/** The thread getting events from a BLOCKING_READ channel, or null. */
	private final AtomicReference<@Nullable Thread> consumer = new AtomicReference<>();

	/** A CQ of this channel is being destroyed: the blocking reader stays out. */
	private volatile boolean paused;

	/** close() has begun: a blocking read returns null. */
	private volatile boolean closing;

	/** cq/ctx out-parameters and errno of the blocking read (owned by the consumer). */
	private final MemorySegment blockingCqOut = Native.unscoped(arena.allocate(ADDRESS));

	private final MemorySegment blockingCtxOut = Native.unscoped(arena.allocate(ADDRESS));

	private final MemorySegment blockingCapture = Native.unscoped(Native.allocateCapture(arena));

	private final Waker closeWaker = new Waker();

	private final MemorySegment cqOut = Native.unscoped(arena.allocate(ADDRESS));

	private final MemorySegment ctxOut = Native.unscoped(arena.allocate(ADDRESS));

	private final MemorySegment capture = Native.unscoped(Native.allocateCapture(arena));

	/**
	 * One pollfd for getEvent's "is anything there" check after a failed read (guarded by
	 * eventLock).
	 */
	private final MemorySegment eventPollFd = Native.unscoped(arena.allocate(Layouts.POLLFD));

	/**
	 * pollfd[2] and a capture segment for a wait without a waker (owned while
	 * scratchBusy).
	 */
	private final MemorySegment scratchFds = Native.unscoped(arena.allocate(Layouts.POLLFD, 2));

	private final MemorySegment scratchCapture = Native.unscoped(Native.allocateCapture(arena));

	@SuppressWarnings("unused") // through SCRATCH_BUSY
	private volatile boolean scratchBusy;

	private static final VarHandle SCRATCH_BUSY = VarHandles.field(MethodHandles.lookup(), "scratchBusy",
			boolean.class);

	/**
	 * Serialises ibv_get_cq_event with the ack-all-then-destroy of a CQ on this channel.
	 */
	final Object eventLock = new Object();

	private volatile CompletionQueue[] queues = new CompletionQueue[0];

	private CompletionChannel(Context context, MemorySegment channel, WaitMode waitMode) {
		super(channel, context);
		this.context = context;
		this.fd = channel.get(JAVA_INT, Layouts.CHANNEL_FD);
		this.waitMode = waitMode;
		this.blocking = waitMode == WaitMode.BLOCKING_READ
				? new BlockingRead("completion channel fd " + fd + " of " + context.deviceName()) : null;
	}

	static CompletionChannel create(Context context, WaitMode waitMode) {
		Objects.requireNonNull(waitMode, "waitMode");
		if (waitMode == WaitMode.BLOCKING_READ) {
			BlockingRead.checkSignalHandler(); // before anything is created
		}
		// the context held open until the channel is registered with it: a close() on
		// another thread is refused before ("closed") or waits and then closes the
		// channel first; it never frees the context while a refused channel is destroyed
		return holdingOpen(context, null, () -> createHeld(context, waitMode));
	}

	/** {@link #create} with the context held open. */
	private static CompletionChannel createHeld(Context context, WaitMode waitMode) {
		MemorySegment channel;
		try (Arena a = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(a);
			channel = (MemorySegment) Ibverbs.CREATE_COMP_CHANNEL.invokeExact(capture, context.handle);
			if (Native.isNull(channel)) {
				throw new VerbsException("ibv_create_comp_channel", Native.errno(capture), context.deviceName());
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		MemorySegment created = channel;
		CompletionChannel c = adopt(() -> new CompletionChannel(context,
				created.reinterpret(Layouts.IBV_COMP_CHANNEL.byteSize()), waitMode),
				() -> Native.callIntVerb(Ibverbs.DESTROY_COMP_CHANNEL, created));
		if (c.blocking != null) {
			c.blocking.register();
			return c;
		}
		try {
			setNonBlocking(c.fd, "completion channel of " + context.deviceName());
		}
		catch (RuntimeException e) {
			c.close();
			throw e;
		}
		return c;
	}

	/** How {@link #getEvent(Duration, Waker)} waits; fixed at creation. */
	public WaitMode waitMode() {
		return waitMode;
	}

	public Context context() {
		return context;
	}

	/**
	 * {@code channel->fd}: non-blocking in {@link WaitMode#POLL}, blocking in
	 * {@link WaitMode#BLOCKING_READ}. Never read it yourself: use {@link #getEvent()}.
	 */
	public int fd() {
		return fd;
	}

	/** The CQs that currently deliver their events to this channel. */
	public java.util.List<CompletionQueue> completionQueues() {
		return java.util.List.of(queues);
	}

	@Override
	String describe() {
		return "CompletionChannel[fd " + fd + ", " + context.deviceName() + "]";
	}

	/**
	 * Waits until the channel has an event, {@code waker} is signalled (consumed), or
	 * {@code timeout} passes. Several threads may wait at once. Returns
	 * {@link WaitResult#WOKEN} too when the channel is being closed.
	 * @param waker a waker that other threads signal to interrupt the wait, or null
	 */
	public WaitResult await(Duration timeout, @Nullable Waker waker) {
		return await(timeout.toNanos(), waker);
	}

	/**
	 * {@link #await(Duration, Waker)} with the timeout in nanoseconds (0 = just look;
	 * rounded up to 1 ms).
	 */
	public WaitResult await(long timeoutNanos, @Nullable Waker waker) {
		acquire();
		try {
			if (waker == null) {
				// The channel's own scratch: a wait without a waker allocates nothing and
				// opens no eventfd (a Waker per wait cost an eventfd, a shared arena and
				// its close's handshake with every Java thread per completion event: the
				// cross-device benchmark's 7x gap, docs/benchmarks-history.md). A
				// second thread waiting at the same time gets a confined arena of its
				// own.
				if (SCRATCH_BUSY.compareAndSet(this, false, true)) {
					try {
						return poll(timeoutNanos, scratchFds, scratchCapture, null);
					}
					finally {
						this.scratchBusy = false;
					}
				}
				try (Arena own = Arena.ofConfined()) {
					return poll(timeoutNanos, own.allocate(Layouts.POLLFD, 2), Native.allocateCapture(own), null);
				}
			}
			waker.claim();
			try {
				return poll(timeoutNanos, waker.pollFds, waker.pollCapture, waker);
			}
			finally {
				waker.unclaim();
			}
		}
		finally {
			release();
		}
	}

	private WaitResult poll(long timeoutNanos, MemorySegment fds, MemorySegment pollCapture, @Nullable Waker waker) {
		boolean watchWaker = waker != null;
		Libc.pollfd(fds, 0, fd);
		Libc.pollfd(fds, 1, closeWaker.fd());
		if (waker != null) {
			Libc.pollfd(fds, 2, waker.fd());
		}
		int n = watchWaker ? 3 : 2;
		int millis = timeoutNanos <= 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, (timeoutNanos + 999_999) / 1_000_000);
		int rc = Libc.poll(fds, n, millis, pollCapture);
		if (rc < 0) {
			if (rc == -Errno.EINTR) {
				return WaitResult.TIMEOUT;
			}
			throw new VerbsException("poll(completion channel fd)", -rc, describe());
		}
		if (rc == 0) {
			return WaitResult.TIMEOUT;
		}
		if (waker != null && Libc.readable(fds, 2)) {
			waker.clear();
			return WaitResult.WOKEN;
		}
		if (Libc.readable(fds, 1)) {
			return WaitResult.WOKEN;
		}
		return WaitResult.READY;
	}

	/**
	 * {@code ibv_get_cq_event} without blocking: the CQ whose event was read, its
	 * got-count incremented (ack it with {@link CompletionQueue#ackEvents()}), or null
	 * when no event is pending.
	 */
	public @Nullable CompletionQueue getEvent() {
		return getEvent(true);
	}

	/**
	 * @param learnWhy on a failed read, find out whether it was "no event" (null) or an
	 * error (thrown); false: null on any failure (for a caller that waits next, whose
	 * wait reports a broken fd)
	 */
	private @Nullable CompletionQueue getEvent(boolean learnWhy) {
		acquire();
		try {
			if (blocking != null) {
				claimConsumer();
				try {
					synchronized (eventLock) {
						// The fd blocks: read only what poll(2) reports (this thread is
						// the only reader)
						return readIfReadable();
					}
				}
				finally {
					consumer.set(null);
				}
			}
			synchronized (eventLock) {
				// First without errno capture. A failure on a fd that poll(2) does not
				// report readable is EAGAIN (or EINTR): no event. Otherwise the call is
				// repeated with errno captured, which reads an event that arrived in
				// between or names the error.
				int rc = (int) Ibverbs.GET_CQ_EVENT_NO_ERRNO.invokeExact(handle, cqOut, ctxOut);
				if (rc == 0) {
					return fired(cqOut.get(JAVA_LONG, 0));
				}
				return learnWhy ? readIfReadable() : null;
			}
		}
		catch (RdmaException | IllegalStateException e) {
			throw e;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
		finally {
			release();
		}
	}

	/**
	 * Under {@link #eventLock}: {@code ibv_get_cq_event} with errno captured, only when
	 * {@code poll(2)} with a zero timeout reports the fd readable (so that it never
	 * blocks, whatever the fd's mode); null when nothing is there (or EAGAIN/EINTR).
	 */
	private @Nullable CompletionQueue readIfReadable() throws Throwable {
		Libc.pollfd(eventPollFd, 0, fd);
		int ready = Libc.poll(eventPollFd, 1, 0, capture);
		if (ready < 0) {
			throw new VerbsException("poll(completion channel fd)", -ready, describe());
		}
		if (ready == 0) {
			return null;
		}
		int rc = (int) Ibverbs.GET_CQ_EVENT.invokeExact(capture, handle, cqOut, ctxOut);
		if (rc != 0) {
			int errno = Native.errno(capture);
			if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
				return null;
			}
			throw new VerbsException("ibv_get_cq_event", errno, describe());
		}
		return fired(cqOut.get(JAVA_LONG, 0));
	}

	/** The CQ an event named, its got-count incremented. */
	private CompletionQueue fired(long address) {
		for (CompletionQueue q : queues) {
			if (q.address() == address) {
				q.eventGot();
				return q;
			}
		}
		throw new IllegalStateException("ibv_get_cq_event returned a CQ (0x" + Long.toHexString(address)
				+ ") that this binding did not create on " + describe());
	}

	/**
	 * Gets an event, waiting up to {@code timeout} for one: the blocking
	 * {@code ibv_get_cq_event} of the man page, with a timeout and a waker. A pending
	 * event costs one {@code read(2)}, as in C; otherwise the failed read is followed by
	 * {@link #await} and {@link #getEvent()}, repeated while the fd was readable but the
	 * event went to another thread. In {@link WaitMode#BLOCKING_READ} it is one blocking
	 * {@code read(2)}, ended by the timeout, the waker or a close (see there). Returns
	 * null on timeout, wake-up or close. Allocation-free.
	 * @param waker a waker that other threads signal to end the wait, or null
	 */
	public @Nullable CompletionQueue getEvent(Duration timeout, @Nullable Waker waker) {
		return getEvent(timeout.toNanos(), waker);
	}

	/** {@link #getEvent(Duration, Waker)} with the timeout in nanoseconds. */
	public @Nullable CompletionQueue getEvent(long timeoutNanos, @Nullable Waker waker) {
		if (blocking != null) {
			return timeoutNanos <= 0 ? getEvent() : getEventBlocking(blocking, timeoutNanos, waker);
		}
		CompletionQueue q = getEvent(false);
		if (q != null) {
			return q;
		}
		long deadline = System.nanoTime() + timeoutNanos;
		while (true) {
			long left = deadline - System.nanoTime();
			if (left <= 0 || await(left, waker) != WaitResult.READY) {
				return null;
			}
			q = getEvent();
			if (q != null) {
				return q;
			}
		}
	}

	/**
	 * {@link WaitMode#BLOCKING_READ}: the blocking read, repeated after a signal that was
	 * not meant for it. A read that fails is repeated with errno captured unless the
	 * failure has its reason (timeout, waker, close): an error then fails again and is
	 * named, at the cost of one more read on a path that ends in an exception.
	 */
	private @Nullable CompletionQueue getEventBlocking(BlockingRead read, long timeoutNanos, @Nullable Waker waker) {
		acquire();
		try {
			claimConsumer();
			boolean claimed = false;
			try {
				if (waker != null) {
					waker.claim();
					claimed = true;
					waker.attach(read);
				}
				long deadline = System.nanoTime() + timeoutNanos;
				// The first read goes without errno capture (the capture cost 1.3-2.4 us
				// per event in the emulated guest's probe: docs/benchmarks-history.md,
				// runs 8 and 9); a read that failed is repeated with errno captured,
				// which names an error (it fails again) or reads.
				boolean capture = false;
				while (true) {
					read.begin(deadline);
					// Checked after begin(): a thread that sets one of these then sees
					// the read under way, and signals it. The deadline is not: the
					// watchdog ends a read past it, and the clock is read after a read
					// that ended without an event (one clock read per event).
					boolean stop = closing || paused || read.interrupted() || (waker != null && waker.pending());
					CompletionQueue q = null;
					int errno = 0;
					try {
						if (!stop) {
							int rc = capture
									? (int) Ibverbs.GET_CQ_EVENT.invokeExact(blockingCapture, handle, blockingCqOut,
											blockingCtxOut)
									: (int) Ibverbs.GET_CQ_EVENT_NO_ERRNO.invokeExact(handle, blockingCqOut,
											blockingCtxOut);
							if (rc == 0) {
								// counted before end(): a CQ close waits for end(), then
								// acks what was got
								q = fired(blockingCqOut.get(JAVA_LONG, 0));
							}
							else if (capture) {
								errno = Native.errno(blockingCapture);
							}
							else {
								capture = true;
							}
						}
					}
					finally {
						read.end();
					}
					if (q != null) {
						return q;
					}
					if (errno != 0 && errno != Errno.EINTR && errno != Errno.EAGAIN) {
						throw new VerbsException("ibv_get_cq_event", errno, describe());
					}
					if (closing) {
						return null;
					}
					if (waker != null && waker.pending()) {
						waker.clear();
						return null;
					}
					if (paused) {
						synchronized (eventLock) {
							// a CQ of this channel is being acked and destroyed: wait for
							// it
						}
					}
					if (System.nanoTime() - deadline >= 0) {
						return null;
					}
				}
			}
			finally {
				if (claimed) {
					waker.detach();
					waker.unclaim();
				}
				consumer.set(null);
			}
		}
		catch (RdmaException | IllegalStateException e) {
			throw e;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
		finally {
			release();
		}
	}

	private void claimConsumer() {
		Thread me = Thread.currentThread();
		if (!consumer.compareAndSet(null, me)) {
			Thread other = consumer.get();
			throw new IllegalStateException(
					"a BLOCKING_READ completion channel has one thread getting events at a time: thread '"
							+ (other == null ? "?" : other.getName()) + "' is getting events from " + describe());
		}
	}

	/**
	 * Before a CQ of this channel acks its events and is destroyed (under
	 * {@link #eventLock}): in {@link WaitMode#BLOCKING_READ}, ends a blocking read under
	 * way and keeps the reader out until {@link #resumeReader()}, so that an event it got
	 * is counted (and acked) before the destroy.
	 */
	void pauseReader() {
		BlockingRead read = blocking;
		if (read == null) {
			return;
		}
		paused = true;
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
		while (read.reading()) {
			read.interrupt();
			if (System.nanoTime() - deadline > 0) {
				paused = false;
				throw new IllegalStateException("the blocking read of " + describe() + " did not end within 10 s");
			}
			LockSupport.parkNanos(50_000);
		}
	}

	void resumeReader() {
		paused = false;
	}

	/** True while a thread is in the blocking read of a BLOCKING_READ channel. */
	boolean blockingReadUnderWay() {
		BlockingRead read = blocking;
		return read != null && read.reading();
	}

	void register(CompletionQueue cq) {
		synchronized (eventLock) {
			CompletionQueue[] q = Arrays.copyOf(queues, queues.length + 1);
			q[q.length - 1] = cq;
			queues = q;
		}
	}

	void unregister(CompletionQueue cq) {
		synchronized (eventLock) {
			queues = Arrays.stream(queues).filter(q -> q != cq).toArray(CompletionQueue[]::new);
		}
	}

	/**
	 * EBUSY foreseen: refused before anything changes (no waiter is woken, nothing is
	 * closed).
	 */
	@Override
	void checkCloseAllowed() {
		CompletionQueue[] q = queues;
		if (q.length > 0) {
			throw new VerbsException("ibv_destroy_comp_channel", Errno.EBUSY,
					"still used by " + q.length + " CQ(s): " + Arrays.toString(q));
		}
	}

	@Override
	void beforeClose() {
		closing = true;
		closeWaker.wake();
		if (blocking != null) {
			blocking.interrupt();
		}
	}

	/**
	 * A close refused after the waiters were woken (a CQ registered meanwhile, or the
	 * provider said EBUSY).
	 */
	@Override
	void closeRefused() {
		closing = false;
		closeWaker.clear();
	}

	/**
	 * Construction failed after {@code NativeObject}'s constructor (the close waker's
	 * {@code eventfd}, without a descriptor left): what was made before is freed.
	 */
	@Override
	void abandoned() {
		if (arena != null) {
			arena.close();
		}
	}

	@Override
	void destroy() {
		if (queues.length > 0) {
			throw new VerbsException("ibv_destroy_comp_channel", Errno.EBUSY,
					"still used by " + queues.length + " CQ(s): " + Arrays.toString(queues));
		}
		destroyVerb(Ibverbs.DESTROY_COMP_CHANNEL, handle, "ibv_destroy_comp_channel", describe());
		if (blocking != null) {
			blocking.unregister();
		}
		closeWaker.close();
		arena.close();
	}

}
