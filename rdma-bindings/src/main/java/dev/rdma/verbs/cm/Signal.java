package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Native;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** A non-blocking eventfd that wakes a thread waiting in poll(2). Thread-safe. */
final class Signal implements AutoCloseable {

	private final Arena arena = Arena.ofShared();

	private final MemorySegment one = arena.allocate(JAVA_LONG);

	private final MemorySegment scratch = arena.allocate(JAVA_LONG);

	private final MemorySegment capture = Native.allocateCapture(arena);

	/**
	 * Scratch of the one thread at a time that waits in {@link EventChannel#pump} for the
	 * id this signal belongs to ({@link IdEvents} hands it out): pollfd[3] and a capture
	 * segment, so that an idle wait allocates nothing.
	 */
	final MemorySegment pollFds = arena.allocate(Layouts.POLLFD, 3);

	final MemorySegment pollCapture = Native.allocateCapture(arena);

	private int fd;

	Signal(String what) {
		int f = Libc.eventfd();
		if (f < 0) {
			arena.close();
			throw new VerbsException("eventfd", -f, what);
		}
		fd = f;
		one.set(JAVA_LONG, 0, 1L);
	}

	synchronized int fd() {
		return fd;
	}

	synchronized void raise() {
		if (fd >= 0) {
			Libc.write8(fd, one, capture);
		}
	}

	synchronized void clear() {
		if (fd >= 0) {
			Libc.read8(fd, scratch, capture);
		}
	}

	@Override
	public synchronized void close() {
		if (fd >= 0) {
			Libc.close(fd);
			fd = -1;
			arena.close();
		}
	}

}
