package dev.rdma.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Pins the calling thread to one CPU ({@code sched_setaffinity(0, ...)} of libc), as the
 * C twins pin themselves: a benchmark's loop thread on a CPU of its own, the other
 * threads of the JVM left where the scheduler puts them.
 */
public final class CpuAffinity {

	private static final Linker LINKER = Linker.nativeLinker();

	private static final StructLayout ERRNO = Linker.Option.captureStateLayout();

	private static final VarHandle ERRNO_VALUE = ERRNO
		.varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));

	/**
	 * {@code int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask)}.
	 */
	private static final MethodHandle SET_AFFINITY = LINKER.downcallHandle(
			LINKER.defaultLookup().find("sched_setaffinity").orElseThrow(),
			FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS), Linker.Option.captureCallState("errno"));

	/** {@code cpu_set_t}: 1024 bits. */
	private static final long CPU_SET_BYTES = 128;

	private CpuAffinity() {
	}

	/**
	 * Pins the calling thread to {@code cpu}.
	 * @throws IllegalStateException naming the errno when the kernel refuses
	 */
	public static void pinCurrentThread(int cpu) {
		if (cpu < 0 || cpu >= CPU_SET_BYTES * 8) {
			throw new IllegalArgumentException("cpu " + cpu + " is outside 0.." + (CPU_SET_BYTES * 8 - 1));
		}
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment mask = arena.allocate(CPU_SET_BYTES, 8);
			mask.set(JAVA_LONG, (cpu / 64) * 8L, 1L << (cpu % 64));
			MemorySegment state = arena.allocate(ERRNO);
			int rc = (int) SET_AFFINITY.invokeExact(state, 0, CPU_SET_BYTES, mask);
			if (rc != 0) {
				throw new IllegalStateException(
						"sched_setaffinity(cpu " + cpu + ") failed: errno " + (int) ERRNO_VALUE.get(state, 0L));
			}
		}
		catch (RuntimeException | Error e) {
			throw e;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Pins the calling thread to the CPU named by the environment variable {@code name},
	 * if it is set and not empty.
	 * @return what was done, for the output ("cpu 1" or "not pinned")
	 */
	public static String pinCurrentThreadFromEnv(String name) {
		String value = System.getenv(name);
		if (value == null || value.isBlank()) {
			return "not pinned";
		}
		int cpu = Integer.parseInt(value.strip());
		pinCurrentThread(cpu);
		return "pinned to cpu " + cpu;
	}

}
