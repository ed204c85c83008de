package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Native;

/**
 * An epoll instance ({@code epoll_create1}, {@code epoll_ctl}, {@code epoll_wait}) that
 * waits on many {@link CompletionChannel}s and one {@link Waker} at once: what a thread
 * that polls many completion queues blocks in, instead of one {@code poll(2)} per
 * channel.
 *
 * <p>
 * Each channel is added with a caller-chosen token ({@code >= 0}, e.g. an index into the
 * caller's table of channels); {@link #await} returns how many channels are readable and
 * {@link #readyToken(int)} names them. A readable channel has at least one event: get it
 * with {@link CompletionChannel#getEvent()}. Registration is level-triggered, so an event
 * left unread makes the next {@code await} return at once. The waker's wake-ups are
 * consumed by {@code await} and reported by {@link #woken()}.
 *
 * <p>
 * Threading: one thread at a time calls {@link #await} (it claims the waker, as
 * {@link CompletionChannel#await} does); {@link #add} and {@link #remove} are meant for
 * that same thread between waits. {@link Waker#wake()} may be called from any thread.
 * {@link #await} allocates nothing. A channel must be {@link #remove removed} before it
 * is closed (a closed fd leaves the epoll set by itself, but its token would be reused
 * only by the caller's bookkeeping). {@link #close()} is idempotent and may be called
 * from any thread (it ends a wait in progress first); it closes neither the channels nor
 * the waker.
 */
public final class Epoll implements AutoCloseable {

	private static final long WAKER_TOKEN = -1;

	private final Waker waker;

	private final int maxEvents;

	private final Arena arena = Arena.ofShared();

	private final MemorySegment events;

	private final MemorySegment capture;

	private final int[] ready;

	private volatile int epfd;

	private boolean woken;

	/** Set by {@link #close()} before it waits for a thread in {@link #await}. */
	private volatile boolean closing;

	/** The thread inside {@link #await}, or null. */
	private volatile Thread awaiting;

	private final Object closeLock = new Object();

	/** How long {@link #close()} waits for a thread in {@link #await} to return. */
	private static final long CLOSE_WAIT_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(10);

	/**
	 * @param waker the waker whose wake-ups end a wait
	 * @param maxEvents the most ready fds one {@link #await} reports (more stay ready for
	 * the next)
	 * @throws VerbsException naming {@code epoll_create1} or {@code epoll_ctl} and the
	 * errno when the kernel refuses
	 */
	public Epoll(Waker waker, int maxEvents) {
		if (maxEvents < 1) {
			arena.close();
			throw new IllegalArgumentException("maxEvents must be at least 1: " + maxEvents);
		}
		this.waker = waker;
		this.maxEvents = maxEvents;
		this.events = Native.unscoped(arena.allocate(dev.rdma.verbs.ffm.Layouts.EPOLL_EVENT, maxEvents));
		this.capture = Native.unscoped(Native.allocateCapture(arena));
		this.ready = new int[maxEvents];
		int fd = Libc.epollCreate();
		if (fd < 0) {
			arena.close();
			throw new VerbsException("epoll_create1", -fd, "an epoll instance for completion channels");
		}
		this.epfd = fd;
		int rc;
		try {
			rc = Libc.epollCtl(fd, Libc.EPOLL_CTL_ADD, waker.fd(), WAKER_TOKEN);
		}
		catch (RuntimeException closedWaker) {
			close();
			throw closedWaker;
		}
		if (rc < 0) {
			close();
			throw new VerbsException("epoll_ctl(EPOLL_CTL_ADD)", -rc, "the waker's eventfd");
		}
	}

	/**
	 * Watches {@code channel}'s fd for events ({@code EPOLL_CTL_ADD}, {@code EPOLLIN}).
	 * @param token what {@link #readyToken} reports for it, 0 or more
	 * @throws VerbsException with the errno (EEXIST: the channel is already added)
	 */
	public void add(CompletionChannel channel, int token) {
		if (token < 0) {
			throw new IllegalArgumentException("token must not be negative: " + token);
		}
		int rc = Libc.epollCtl(fd(), Libc.EPOLL_CTL_ADD, channel.fd(), token);
		if (rc < 0) {
			throw new VerbsException("epoll_ctl(EPOLL_CTL_ADD)", -rc, channel.toString());
		}
	}

	/**
	 * Stops watching {@code channel} ({@code EPOLL_CTL_DEL}).
	 * @throws VerbsException with the errno (ENOENT: it was not added)
	 */
	public void remove(CompletionChannel channel) {
		int rc = Libc.epollCtl(fd(), Libc.EPOLL_CTL_DEL, channel.fd(), 0);
		if (rc < 0) {
			throw new VerbsException("epoll_ctl(EPOLL_CTL_DEL)", -rc, channel.toString());
		}
	}

	/**
	 * {@code epoll_wait}: waits until a channel is readable, the waker is signalled, or
	 * {@code timeoutNanos} passes (0: just look; else rounded up to whole milliseconds).
	 * @return how many channels are readable ({@link #readyToken} 0 .. n-1); 0 on
	 * timeout, wake-up or EINTR
	 */
	public int await(long timeoutNanos) {
		int millis = timeoutNanos <= 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, (timeoutNanos + 999_999) / 1_000_000);
		waker.claim();
		int rc;
		awaiting = Thread.currentThread();
		try {
			if (closing) {
				throw new IllegalStateException("epoll instance is closed");
			}
			rc = Libc.epollWait(fd(), events, maxEvents, millis, capture);
			woken = false;
			if (rc < 0) {
				if (rc == -Errno.EINTR) {
					return 0;
				}
				throw new VerbsException("epoll_wait", -rc, "an epoll instance of " + maxEvents + " events");
			}
			int channels = 0;
			for (int i = 0; i < rc; i++) {
				long token = Libc.epollData(events, i);
				if (token == WAKER_TOKEN) {
					woken = true;
					waker.clear();
				}
				else {
					ready[channels++] = (int) token;
				}
			}
			return channels;
		}
		finally {
			awaiting = null;
			waker.unclaim();
		}
	}

	/** The token of the {@code i}-th readable channel of the last {@link #await}. */
	public int readyToken(int i) {
		return ready[i];
	}

	/** Whether the last {@link #await} consumed a wake-up of the waker. */
	public boolean woken() {
		return woken;
	}

	private int fd() {
		int f = epfd;
		if (f < 0) {
			throw new IllegalStateException("epoll instance is closed");
		}
		return f;
	}

	/**
	 * Closes the epoll fd and frees its memory; idempotent. A thread inside
	 * {@link #await} on another thread is woken first (through the waker, whose fd is in
	 * the set) and waited for, at most 10 s: the kernel writes the ready events into this
	 * instance's memory, which must not be freed under it.
	 * @throws IllegalStateException when that thread did not return within 10 s (the
	 * instance then stays open)
	 */
	@Override
	public void close() {
		synchronized (closeLock) {
			int f = epfd;
			if (f < 0) {
				return;
			}
			closing = true;
			Thread t = awaiting;
			if (t != null && t != Thread.currentThread()) {
				try {
					waker.wake();
				}
				catch (IllegalStateException closedWaker) {
					// the wait then ends at its timeout, or below
				}
				long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
				while (awaiting == t) {
					if (System.nanoTime() - deadline > 0) {
						closing = false;
						throw new IllegalStateException("cannot close the epoll instance: " + t.getName()
								+ " did not return from await within 10 s");
					}
					java.util.concurrent.locks.LockSupport.parkNanos(100_000);
				}
			}
			epfd = -1;
			Libc.close(f);
			arena.close();
		}
	}

}
