package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An eventfd that another thread writes to wake a thread blocked in {@link CompletionChannel#await} or
 * {@link Context#getAsyncEvent}. {@link #wake()} is thread-safe; one thread at a time waits with a given waker (it
 * carries that thread's scratch memory). {@link #close()} is idempotent.
 */
public final class Waker implements AutoCloseable {

    private final Arena arena = Arena.ofShared();
    private final MemorySegment one = Native.unscoped(arena.allocate(JAVA_LONG));
    private final MemorySegment scratch = Native.unscoped(arena.allocate(JAVA_LONG));
    private final MemorySegment capture = Native.unscoped(Native.allocateCapture(arena));
    /** Scratch of the thread that waits with this waker: pollfd[3] and a capture segment, so a wait allocates nothing. */
    final MemorySegment pollFds = Native.unscoped(arena.allocate(Layouts.POLLFD, 3));
    final MemorySegment pollCapture = Native.unscoped(Native.allocateCapture(arena));
    private volatile int fd;

    public Waker() {
        this.fd = Libc.eventfd();
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
            Libc.write8(fd, one, capture);
        }
    }

    /** Consumes pending wake-ups. */
    synchronized void clear() {
        if (fd >= 0) {
            Libc.read8(fd, scratch, capture);
        }
    }

    @Override
    public synchronized void close() {
        int f = fd;
        if (f >= 0) {
            fd = -1;
            Libc.close(f);
            arena.close();
        }
    }
}
