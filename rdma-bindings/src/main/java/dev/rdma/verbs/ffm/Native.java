package dev.rdma.verbs.ffm;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/** Shared FFM plumbing: the linker, errno capture, library lookup. */
public final class Native {

	private Native() {
	}

	public static final Linker LINKER = Linker.nativeLinker();

	/**
	 * Captures errno in the same downcall: reading it later is unreliable, the JVM makes
	 * libc calls in between.
	 */
	public static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

	public static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();

	private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

	/**
	 * For short, non-blocking calls on the poll path (poll_cq, req_notify_cq, the cq_ex
	 * iterator and readers).
	 */
	public static final Linker.Option CRITICAL = Linker.Option.critical(false);

	public static final String UNSUPPORTED_ARCH;

	static {
		String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
		String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
		UNSUPPORTED_ARCH = (arch.equals("amd64") || arch.equals("x86_64")) && os.startsWith("linux") ? null
				: "rdma-bindings supports Linux on x86_64 only (its struct layouts are those of x86_64 LP64 glibc); "
						+ "this JVM runs on " + System.getProperty("os.name") + "/" + arch;
	}

	public static int errno(MemorySegment capture) {
		return (int) ERRNO.get(capture, 0L);
	}

	public static MemorySegment allocateCapture(Arena arena) {
		return arena.allocate(CAPTURE_LAYOUT);
	}

	/**
	 * A downcall to a symbol of {@code lookup}, or null when the library or the symbol is
	 * absent.
	 */
	public static @Nullable MethodHandle symbol(Optional<SymbolLookup> lookup, String name, FunctionDescriptor fd,
			Linker.Option... options) {
		return lookup.flatMap(l -> l.find(name)).map(addr -> LINKER.downcallHandle(addr, fd, options)).orElse(null);
	}

	/**
	 * A downcall through a function pointer: the handle's first parameter is the target
	 * address.
	 */
	public static MethodHandle pointer(FunctionDescriptor fd, Linker.Option... options) {
		return LINKER.downcallHandle(fd, options);
	}

	public static Optional<SymbolLookup> library(String soname, Throwable[] failure) {
		if (UNSUPPORTED_ARCH != null) {
			failure[0] = new UnsupportedOperationException(UNSUPPORTED_ARCH);
			return Optional.empty();
		}
		try {
			return Optional.of(SymbolLookup.libraryLookup(soname, Arena.global()));
		}
		catch (IllegalArgumentException | IllegalCallerException e) {
			failure[0] = e;
			return Optional.empty();
		}
	}

	/**
	 * A global-scope alias of {@code segment}, for passing to native code on the poll
	 * path: a segment of a shared arena passed to a downcall makes the linker acquire and
	 * release its session (two atomic updates) on every call. The owner of the alias
	 * guarantees the memory outlives its use (the binding frees it only in close()).
	 */
	public static MemorySegment unscoped(MemorySegment segment) {
		return MemorySegment.ofAddress(segment.address()).reinterpret(segment.byteSize());
	}

	/**
	 * Calls a destroy-style verb {@code int verb(void *object)}: 0 or a positive errno
	 * value.
	 */
	public static int callIntVerb(MethodHandle handle, MemorySegment object) {
		try {
			return (int) handle.invokeExact(object);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * What a {@code catch (Throwable t)} around {@code invokeExact} rethrows: unchecked
	 * exceptions and errors as they are, anything else wrapped (a downcall handle
	 * declares Throwable but throws nothing checked).
	 */
	public static RuntimeException unchecked(Throwable t) {
		if (t instanceof RuntimeException r) {
			return r;
		}
		if (t instanceof Error e) {
			throw e;
		}
		return new IllegalStateException(t);
	}

	public static boolean isNull(MemorySegment pointer) {
		return pointer.address() == 0L;
	}

	/** Reads a NUL-terminated C string at {@code pointer}, or null for NULL. */
	public static @Nullable String string(MemorySegment pointer) {
		if (isNull(pointer)) {
			return null;
		}
		return pointer.reinterpret(Long.MAX_VALUE).getString(0);
	}

	public static final FunctionDescriptor PTR_PTR = FunctionDescriptor.of(ADDRESS, ADDRESS);

	public static final FunctionDescriptor INT_PTR = FunctionDescriptor.of(JAVA_INT, ADDRESS);

	public static final FunctionDescriptor VOID_PTR = FunctionDescriptor.ofVoid(ADDRESS);

}
