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

	private final Context context;

	private final int fd;

	private final Waker closeWaker = new Waker();

	private final Arena arena = Arena.ofShared();

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

	private static final VarHandle SCRATCH_BUSY;

	static {
		try {
			SCRATCH_BUSY = MethodHandles.lookup().findVarHandle(CompletionChannel.class, "scratchBusy", boolean.class);
		}
		catch (ReflectiveOperationException e) {
			throw new ExceptionInInitializerError(e);
		}
	}

	/**
	 * Serialises ibv_get_cq_event with the ack-all-then-destroy of a CQ on this channel.
	 */
	final Object eventLock = new Object();

	private volatile CompletionQueue[] queues = new CompletionQueue[0];

	private CompletionChannel(Context context, MemorySegment channel) {
		super(channel, context);
		this.context = context;
		this.fd = channel.get(JAVA_INT, Layouts.CHANNEL_FD);
	}

	static CompletionChannel create(Context context) {
		context.acquire();
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
		finally {
			context.release();
		}
		MemorySegment created = channel;
		CompletionChannel c = adopt(
				() -> new CompletionChannel(context, created.reinterpret(Layouts.IBV_COMP_CHANNEL.byteSize())),
				() -> Native.callIntVerb(Ibverbs.DESTROY_COMP_CHANNEL, created));
		try {
			setNonBlocking(c.fd, "completion channel of " + context.deviceName());
		}
		catch (RuntimeException e) {
			c.close();
			throw e;
		}
		return c;
	}

	public Context context() {
		return context;
	}

	/**
	 * {@code channel->fd}, in non-blocking mode. Never read it yourself: use
	 * {@link #getEvent()}.
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
				// cross-device benchmark's 7x gap, docs/benchmarks.md). A second thread
				// waiting at the same time gets a confined arena of its own.
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
			synchronized (eventLock) {
				// Without errno capture (it would allocate on this never-hot path). A
				// failure on a fd that poll(2)
				// does not report readable is EAGAIN (or EINTR): no event. Otherwise the
				// call is repeated with errno
				// captured, which reads an event that arrived in between or names the
				// error.
				int rc = (int) Ibverbs.GET_CQ_EVENT_NO_ERRNO.invokeExact(handle, cqOut, ctxOut);
				if (rc != 0) {
					if (!learnWhy) {
						return null;
					}
					Libc.pollfd(eventPollFd, 0, fd);
					if (Libc.poll(eventPollFd, 1, 0, capture) == 0) {
						return null;
					}
					rc = (int) Ibverbs.GET_CQ_EVENT.invokeExact(capture, handle, cqOut, ctxOut);
					if (rc != 0) {
						int errno = Native.errno(capture);
						if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
							return null;
						}
						throw new VerbsException("ibv_get_cq_event", errno, describe());
					}
				}
				long fired = cqOut.get(JAVA_LONG, 0);
				for (CompletionQueue q : queues) {
					if (q.address() == fired) {
						q.eventGot();
						return q;
					}
				}
				throw new IllegalStateException("ibv_get_cq_event returned a CQ (0x" + Long.toHexString(fired)
						+ ") that this binding did not create on " + describe());
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
	 * Gets an event, waiting up to {@code timeout} for one: the blocking
	 * {@code ibv_get_cq_event} of the man page, with a timeout and a waker. A pending
	 * event costs one {@code read(2)}, as in C; otherwise the failed read is followed by
	 * {@link #await} and {@link #getEvent()}, repeated while the fd was readable but the
	 * event went to another thread. Returns null on timeout or wake-up. Allocation-free.
	 */
	public @Nullable CompletionQueue getEvent(Duration timeout, @Nullable Waker waker) {
		return getEvent(timeout.toNanos(), waker);
	}

	/** {@link #getEvent(Duration, Waker)} with the timeout in nanoseconds. */
	public @Nullable CompletionQueue getEvent(long timeoutNanos, @Nullable Waker waker) {
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
		closeWaker.wake();
	}

	/**
	 * A close refused after the waiters were woken (a CQ registered meanwhile, or the
	 * provider said EBUSY).
	 */
	@Override
	void closeRefused() {
		closeWaker.clear();
	}

	@Override
	void destroy() {
		if (queues.length > 0) {
			throw new VerbsException("ibv_destroy_comp_channel", Errno.EBUSY,
					"still used by " + queues.length + " CQ(s): " + Arrays.toString(queues));
		}
		destroyVerb(Ibverbs.DESTROY_COMP_CHANNEL, handle, "ibv_destroy_comp_channel", describe());
		closeWaker.close();
		arena.close();
	}

}
