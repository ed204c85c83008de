package dev.rdma.verbs.ffm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.BitSet;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * {@code sched_setaffinity(2)} and {@code sched_getaffinity(2)} of the calling thread
 * (pid 0), with a {@code cpu_set_t} of 1024 CPUs (128 bytes, glibc's size). Not critical:
 * the calls enter the kernel.
 */
public final class Sched {

	/** Bytes of glibc's {@code cpu_set_t}: CPU_SETSIZE 1024 bits. */
	public static final int CPU_SET_BYTES = 128;

	private static final Optional<java.lang.foreign.SymbolLookup> LIBC = Optional.of(Native.LINKER.defaultLookup());

	/**
	 * {@code int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask)}.
	 */
	private static final MethodHandle SET = Native.symbol(LIBC, "sched_setaffinity",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS), Native.CAPTURE_ERRNO);

	/** {@code int sched_getaffinity(pid_t pid, size_t cpusetsize, cpu_set_t *mask)}. */
	private static final MethodHandle GET = Native.symbol(LIBC, "sched_getaffinity",
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS), Native.CAPTURE_ERRNO);

	private Sched() {
	}

	/** Sets the calling thread's CPUs: 0, or the errno. */
	public static int setAffinity(BitSet cpus) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment mask = arena.allocate(CPU_SET_BYTES, 8);
			byte[] bytes = cpus.toByteArray();
			if (bytes.length > CPU_SET_BYTES) {
				return 22; // EINVAL: beyond CPU_SETSIZE
			}
			MemorySegment.copy(MemorySegment.ofArray(bytes), 0, mask, 0, bytes.length);
			MemorySegment capture = Native.allocateCapture(arena);
			int rc = (int) SET.invokeExact(capture, 0, (long) CPU_SET_BYTES, mask);
			return rc == 0 ? 0 : Native.errno(capture);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/** The calling thread's CPUs. */
	public static BitSet getAffinity() {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment mask = arena.allocate(CPU_SET_BYTES, 8);
			MemorySegment capture = Native.allocateCapture(arena);
			int rc = (int) GET.invokeExact(capture, 0, (long) CPU_SET_BYTES, mask);
			if (rc != 0) {
				throw new IllegalStateException("sched_getaffinity failed: errno " + Native.errno(capture));
			}
			return BitSet.valueOf(mask.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

}
