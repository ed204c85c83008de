package dev.rdma.verbs.ffm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import org.jspecify.annotations.Nullable;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The few libc calls the binding needs: poll(2), epoll(7), eventfd(2), fcntl(2),
 * read/write/close, strerror.
 */
public final class Libc {

	private Libc() {
	}

	public static final int F_GETFL = 3;

	public static final int F_SETFL = 4;

	public static final int O_NONBLOCK = 0x800;

	public static final int EFD_CLOEXEC = 0x80000;

	public static final int EFD_NONBLOCK = 0x800;

	public static final short POLLIN = 0x1;

	public static final int EPOLLIN = 0x1;

	public static final int EPOLL_CLOEXEC = 0x80000;

	public static final int EPOLL_CTL_ADD = 1;

	public static final int EPOLL_CTL_DEL = 2;

	private static final Optional<java.lang.foreign.SymbolLookup> LIBC = Optional.of(Native.LINKER.defaultLookup());

	private static final MethodHandle STRERROR = Native.symbol(LIBC, "strerror",
			FunctionDescriptor.of(ADDRESS, JAVA_INT));

	private static final MethodHandle ERRNO_LOCATION = Native.symbol(LIBC, "__errno_location",
			FunctionDescriptor.of(ADDRESS));

	/*
	 * The calls of the event path (poll, read and write of eventfds) come in two
	 * linkages: without errno capture for the common case, and with it, used only to
	 * learn errno after a failure. A downcall that captures errno slices its capture
	 * segment (an object) on every call unless the JIT inlines the whole call, and the
	 * event path is never hot enough for that: a poller thread would allocate on every
	 * wake-up.
	 */
	private static final MethodHandle POLL = Native.symbol(LIBC, "poll",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), Native.CAPTURE_ERRNO);

	private static final MethodHandle POLL_NO_ERRNO = Native.symbol(LIBC, "poll",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

	private static final MethodHandle EVENTFD = Native.symbol(LIBC, "eventfd",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO);

	private static final MethodHandle FCNTL_GET = Native.symbol(LIBC, "fcntl",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO);

	private static final MethodHandle FCNTL_SET = Native.symbol(LIBC, "fcntl",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO,
			Linker.Option.firstVariadicArg(2));

	private static final MethodHandle READ = Native.symbol(LIBC, "read",
			FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG), Native.CAPTURE_ERRNO);

	private static final MethodHandle READ_NO_ERRNO = Native.symbol(LIBC, "read",
			FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));

	private static final MethodHandle WRITE = Native.symbol(LIBC, "write",
			FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG), Native.CAPTURE_ERRNO);

	private static final MethodHandle WRITE_NO_ERRNO = Native.symbol(LIBC, "write",
			FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));

	private static final MethodHandle EPOLL_CREATE1 = Native.symbol(LIBC, "epoll_create1",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO);

	private static final MethodHandle EPOLL_CTL = Native.symbol(LIBC, "epoll_ctl",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS), Native.CAPTURE_ERRNO);

	// epoll_wait blocks: never critical linkage. Without errno capture on the common
	// path, as poll above.
	private static final MethodHandle EPOLL_WAIT = Native.symbol(LIBC, "epoll_wait",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO);

	private static final MethodHandle EPOLL_WAIT_NO_ERRNO = Native.symbol(LIBC, "epoll_wait",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));

	private static final MethodHandle CLOSE = Native.symbol(LIBC, "close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));

	/**
	 * The signal the JDK sends to end a thread's blocking I/O
	 * ({@code sun.nio.ch.NativeThread} and {@code java.net}'s {@code linux_close.c}:
	 * {@code __SIGRTMAX - 2}); the JDK installs a no-op handler for it without
	 * {@code SA_RESTART}, so a blocking {@code read(2)} that it hits fails with EINTR.
	 * The layout probe proves the value.
	 */
	public static final int JDK_INTERRUPT_SIGNAL = 62;

	/** {@code sizeof(struct sigaction)} (x86_64 glibc; proven by the layout probe). */
	public static final int SIGACTION_BYTES = 152;

	/** {@code offsetof(struct sigaction, sa_handler)}. */
	public static final int SIGACTION_HANDLER = 0;

	/** {@code offsetof(struct sigaction, sa_flags)}. */
	public static final int SIGACTION_FLAGS = 136;

	public static final int SA_RESTART = 0x10000000;

	/** {@code SIG_DFL} and {@code SIG_IGN} as addresses. */
	public static final long SIG_DFL = 0;

	public static final long SIG_IGN = 1;

	private static final MethodHandle SIGACTION = Native.symbol(LIBC, "sigaction",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS), Native.CAPTURE_ERRNO);

	/** Neither blocks nor spins: critical linkage is allowed, and keeps it cheap. */
	private static final MethodHandle PTHREAD_SELF = Native.symbol(LIBC, "pthread_self",
			FunctionDescriptor.of(JAVA_LONG), Linker.Option.critical(false));

	private static final MethodHandle PTHREAD_KILL = Native.symbol(LIBC, "pthread_kill",
			FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT));

	private static final long SYS_MEMBARRIER = 324; // x86_64

	private static final int MEMBARRIER_CMD_QUERY = 0;

	private static final int MEMBARRIER_CMD_GLOBAL = 1;

	private static final int MEMBARRIER_CMD_PRIVATE_EXPEDITED = 8;

	private static final int MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED = 16;

	private static final MethodHandle SYSCALL = Native.symbol(LIBC, "syscall",
			FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT), Native.CAPTURE_ERRNO,
			Linker.Option.firstVariadicArg(1));

	/**
	 * The membarrier(2) command {@link #membarrier()} uses, or -1 when the kernel offers
	 * none.
	 */
	private static final int MEMBARRIER_CMD = membarrierCommand();

	/**
	 * True when {@link #membarrier()} is available (Linux 4.14+ for the process-private
	 * expedited command, 4.3+ for the global one, unless filtered by seccomp).
	 */
	public static final boolean MEMBARRIER = MEMBARRIER_CMD != -1;

	private static int membarrierCommand() {
		long commands = membarrier(MEMBARRIER_CMD_QUERY);
		if (commands <= 0) {
			return -1;
		}
		if ((commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0
				&& membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
			return MEMBARRIER_CMD_PRIVATE_EXPEDITED;
		}
		return (commands & MEMBARRIER_CMD_GLOBAL) != 0 ? MEMBARRIER_CMD_GLOBAL : -1;
	}

	private static long membarrier(int cmd) {
		try (Arena arena = Arena.ofConfined()) {
			return (long) SYSCALL.invokeExact(Native.allocateCapture(arena), SYS_MEMBARRIER, cmd, 0);
		}
		catch (Throwable t) {
			return -1;
		}
	}

	/**
	 * membarrier(2): when it returns, every running thread of this process has passed a
	 * full memory barrier, so the caller sees their earlier stores and they see the
	 * caller's (the slow side of an asymmetric Dekker pair whose fast side uses plain
	 * stores). Microseconds (expedited: an IPI per CPU running a thread of the process)
	 * to milliseconds (global: an RCU grace period): rare paths only. Requires
	 * {@link #MEMBARRIER}.
	 */
	public static void membarrier() {
		if (membarrier(MEMBARRIER_CMD) != 0) {
			throw new IllegalStateException("membarrier(" + MEMBARRIER_CMD + ") failed although the kernel offers it");
		}
	}

	public static String strerror(int errno) {
		try {
			MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
			String s = Native.string(text);
			return s == null ? "errno " + errno : s;
		}
		catch (Throwable t) {
			return "errno " + errno;
		}
	}

	/**
	 * Sets this thread's errno to 0, so that a verb that fails without setting it is not
	 * blamed on a stale one.
	 */
	public static void clearErrno() {
		try {
			MemorySegment location = (MemorySegment) ERRNO_LOCATION.invokeExact();
			location.reinterpret(4).set(JAVA_INT, 0, 0);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Puts {@code fd} into non-blocking mode ({@code fcntl(F_GETFL)},
	 * {@code fcntl(F_SETFL)}): 0, or the errno.
	 */
	public static int setNonBlocking(int fd) {
		return setNonBlocking(fd, true);
	}

	private static int setNonBlocking(int fd, boolean nonBlocking) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			int flags = (int) FCNTL_GET.invokeExact(capture, fd, F_GETFL);
			if (flags < 0) {
				return Native.errno(capture);
			}
			int wanted = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
			int rc = (int) FCNTL_SET.invokeExact(capture, fd, F_SETFL, wanted);
			return rc < 0 ? Native.errno(capture) : 0;
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	public static boolean isNonBlocking(int fd) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			int flags = (int) FCNTL_GET.invokeExact(capture, fd, F_GETFL);
			return flags >= 0 && (flags & O_NONBLOCK) != 0;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** {@code eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)}: the fd, or minus the errno. */
	public static int eventfd() {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			int fd = (int) EVENTFD.invokeExact(capture, 0, EFD_CLOEXEC | EFD_NONBLOCK);
			return fd < 0 ? -Native.errno(capture) : fd;
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * poll(2); returns the count of ready fds, 0 on timeout, or -errno. Allocation-free:
	 * after a failure (EINTR) the call is repeated once with a zero timeout and errno
	 * captured, which either reports the fds ready by then or the errno of a persistent
	 * failure.
	 */
	public static int poll(MemorySegment fds, int nfds, int timeoutMillis, MemorySegment capture) {
		try {
			int rc = (int) POLL_NO_ERRNO.invokeExact(fds, (long) nfds, timeoutMillis);
			if (rc >= 0) {
				return rc;
			}
			rc = (int) POLL.invokeExact(capture, fds, (long) nfds, 0);
			return rc < 0 ? -Native.errno(capture) : rc;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** {@code epoll_create1(EPOLL_CLOEXEC)}: the fd, or minus the errno. */
	public static int epollCreate() {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			int fd = (int) EPOLL_CREATE1.invokeExact(capture, EPOLL_CLOEXEC);
			return fd < 0 ? -Native.errno(capture) : fd;
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * {@code epoll_ctl(epfd, op, fd, &{EPOLLIN, data})} (level-triggered): 0, or minus
	 * the errno. Allocates (registration is not on the event path).
	 */
	public static int epollCtl(int epfd, int op, int fd, long data) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment event = arena.allocate(Layouts.EPOLL_EVENT);
			event.set(JAVA_INT_UNALIGNED, EPOLL_EVENT_EVENTS, EPOLLIN);
			event.set(JAVA_LONG_UNALIGNED, EPOLL_EVENT_DATA, data);
			int rc = (int) EPOLL_CTL.invokeExact(capture, epfd, op, fd, event);
			return rc < 0 ? -Native.errno(capture) : 0;
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * epoll_wait(2) into {@code events} (room for {@code maxEvents}); returns the count
	 * of ready fds, 0 on timeout, or -errno. Allocation-free, like {@link #poll}: a
	 * failure (EINTR) is repeated once with a zero timeout and errno captured.
	 */
	public static int epollWait(int epfd, MemorySegment events, int maxEvents, int timeoutMillis,
			MemorySegment capture) {
		try {
			int rc = (int) EPOLL_WAIT_NO_ERRNO.invokeExact(epfd, events, maxEvents, timeoutMillis);
			if (rc >= 0) {
				return rc;
			}
			rc = (int) EPOLL_WAIT.invokeExact(capture, epfd, events, maxEvents, 0);
			return rc < 0 ? -Native.errno(capture) : rc;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** The {@code data} of the {@code epoll_event} at {@code index}. */
	public static long epollData(MemorySegment events, int index) {
		return events.get(JAVA_LONG_UNALIGNED, index * EPOLL_EVENT_SIZE + EPOLL_EVENT_DATA);
	}

	/**
	 * read(2) of 8 bytes (an eventfd); returns bytes read or -errno. A failed read
	 * (nothing to read: EAGAIN) is repeated once with errno captured: nothing is lost,
	 * the repeat reads what arrived in between or fails the same.
	 */
	public static long read8(int fd, MemorySegment buf8, MemorySegment capture) {
		try {
			long rc = (long) READ_NO_ERRNO.invokeExact(fd, buf8, 8L);
			if (rc >= 0) {
				return rc;
			}
			rc = (long) READ.invokeExact(capture, fd, buf8, 8L);
			return rc < 0 ? -Native.errno(capture) : rc;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * write(2) of 8 bytes (an eventfd); returns bytes written or -errno. A failed write
	 * wrote nothing: repeated once.
	 */
	public static long write8(int fd, MemorySegment buf8, MemorySegment capture) {
		try {
			long rc = (long) WRITE_NO_ERRNO.invokeExact(fd, buf8, 8L);
			if (rc >= 0) {
				return rc;
			}
			rc = (long) WRITE.invokeExact(capture, fd, buf8, 8L);
			return rc < 0 ? -Native.errno(capture) : rc;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * {@code sigaction(sig, NULL, &old)}: the installed handler of {@code sig} as
	 * {handler address, sa_flags}, or null with the errno in {@code errnoOut[0]}.
	 */
	public static long @Nullable [] sigactionOf(int sig, int[] errnoOut) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment old = arena.allocate(SIGACTION_BYTES, 8);
			int rc = (int) SIGACTION.invokeExact(capture, sig, MemorySegment.NULL, old);
			if (rc != 0) {
				errnoOut[0] = Native.errno(capture);
				return null;
			}
			return new long[] { old.get(JAVA_LONG, SIGACTION_HANDLER), old.get(JAVA_INT, SIGACTION_FLAGS) };
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/** {@code pthread_self()} of the calling thread. */
	public static long pthreadSelf() {
		try {
			return (long) PTHREAD_SELF.invokeExact();
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * {@code pthread_kill(thread, sig)}: 0 or the error number. The caller guarantees
	 * that {@code thread} has not exited (a pthread_t of an ended thread is undefined
	 * behaviour).
	 */
	public static int pthreadKill(long thread, int sig) {
		try {
			return (int) PTHREAD_KILL.invokeExact(thread, sig);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * One read(2) of {@code len} bytes into {@code buf}, errno captured, never repeated:
	 * bytes read or -errno (EINTR included).
	 */
	public static long readOnce(int fd, MemorySegment buf, long len, MemorySegment capture) {
		try {
			long rc = (long) READ.invokeExact(capture, fd, buf, len);
			return rc < 0 ? -Native.errno(capture) : rc;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Takes {@code fd} out of non-blocking mode ({@code fcntl(F_GETFL)},
	 * {@code fcntl(F_SETFL)}): 0, or the errno.
	 */
	public static int setBlocking(int fd) {
		return setNonBlocking(fd, false);
	}

	public static void close(int fd) {
		try {
			int ignored = (int) CLOSE.invokeExact(fd);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** Sets the {@code pollfd} at {@code index}. */
	public static void pollfd(MemorySegment fds, int index, int fd) {
		long base = index * POLLFD_SIZE;
		fds.set(JAVA_INT, base + POLLFD_FD, fd);
		fds.set(JAVA_SHORT, base + POLLFD_EVENTS, POLLIN);
		fds.set(JAVA_SHORT, base + POLLFD_REVENTS, (short) 0);
	}

	public static boolean readable(MemorySegment fds, int index) {
		return fds.get(JAVA_SHORT, index * POLLFD_SIZE + POLLFD_REVENTS) != 0;
	}

	private static final long EPOLL_EVENT_SIZE = Layouts.EPOLL_EVENT.byteSize();

	private static final long EPOLL_EVENT_EVENTS = Layouts.off(Layouts.EPOLL_EVENT, "events");

	private static final long EPOLL_EVENT_DATA = Layouts.off(Layouts.EPOLL_EVENT, "data");

	private static final long POLLFD_SIZE = Layouts.POLLFD.byteSize();

	private static final long POLLFD_FD = Layouts.off(Layouts.POLLFD, "fd");

	private static final long POLLFD_EVENTS = Layouts.off(Layouts.POLLFD, "events");

	private static final long POLLFD_REVENTS = Layouts.off(Layouts.POLLFD, "revents");

}
