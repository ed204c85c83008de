package dev.rdma.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import javax.management.JMException;
import javax.management.ObjectName;

import org.jspecify.annotations.Nullable;

/**
 * The Java benchmarks' side of scripts/bench's instruction-count mode
 * ({@code BENCH_INSNS=1}, docs/benchmarks.md "Instructions per message"): a labelled
 * marker instruction at the boundaries of a measured window, which the QEMU plugin
 * benchmarks/src/main/c/insn_plugin.c turns into a line with the guest's instruction
 * counts. The marker is {@code bench_mark_label} of libbenchmark.so
 * (benchmarks/src/main/c/bench_mark.c, path in {@code BENCH_INSNS_LIB}), called through
 * an FFM downcall.
 *
 * <p>
 * Off unless {@code BENCH_INSNS=1}: then {@link #ON} is a constant {@code false}, the JIT
 * folds every call away, and a normal run is unchanged. Labels are made once, before the
 * measured code ({@link #label}): a mark allocates nothing. The labels follow
 * bench_mark.h: {@code "B case=.. impl=java rt=N"} begins a group of windows, {@code "N"}
 * is a window boundary, {@code "E"} ends the group.
 *
 * <p>
 * Threading: any thread; the plugin expects one labelled mark at a time in the whole
 * guest, which the benchmarks keep (one thread marks).
 */
public final class InsnMark {

	/** Whether the mode is on ({@code BENCH_INSNS=1}). */
	public static final boolean ON = "1".equals(System.getenv("BENCH_INSNS"));

	private static final @Nullable MethodHandle MARK = ON ? link() : null;

	/** The window boundary label. */
	public static final MemorySegment BOUNDARY = label("N");

	/** The group's end label. */
	public static final MemorySegment END = label("E");

	private InsnMark() {
	}

	private static MethodHandle link() {
		String lib = System.getenv("BENCH_INSNS_LIB");
		if (lib == null || lib.isEmpty()) {
			throw new IllegalStateException("BENCH_INSNS=1 but BENCH_INSNS_LIB (path of libbenchmark.so) is not set");
		}
		MemorySegment fn = SymbolLookup.libraryLookup(Path.of(lib), Arena.global()).findOrThrow("bench_mark_label");
		return Linker.nativeLinker().downcallHandle(fn, FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
	}

	/**
	 * A label for {@link #mark}, NUL-terminated in global memory (never freed: a few per
	 * run); {@link MemorySegment#NULL} when the mode is off.
	 * @param text the label's text
	 * @return the label's memory
	 */
	public static MemorySegment label(String text) {
		return ON ? Arena.global().allocateFrom(text) : MemorySegment.NULL;
	}

	/**
	 * With the mode on and {@code BENCH_INSNS_PROFILE_DIR} set (scripts/bench
	 * {@code BENCH_INSNS_PROFILE=1}): writes this process's {@code /proc/self/maps} and
	 * the JIT's code list (the {@code Compiler.codelist} diagnostic command: every
	 * compiled method's address range) to {@code DIR/NAME.maps} and
	 * {@code DIR/NAME.codelist}, for insns_profile.py to name the user addresses of the
	 * plugin's profile. Call it after the group's end mark.
	 * @param name the group's case name
	 */
	public static void saveProfileContext(String name) {
		String dir = System.getenv("BENCH_INSNS_PROFILE_DIR");
		if (!ON || dir == null || dir.isEmpty()) {
			return;
		}
		try {
			Files.copy(Path.of("/proc/self/maps"), Path.of(dir, name + ".maps"), StandardCopyOption.REPLACE_EXISTING);
			String list = (String) ManagementFactory.getPlatformMBeanServer()
				.invoke(new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerCodelist", null, null);
			Files.writeString(Path.of(dir, name + ".codelist"), list);
		}
		catch (IOException | JMException ex) {
			System.err.println("# InsnMark: no profile context for " + name + ": " + ex);
		}
	}

	/**
	 * Executes the marker with {@code label} (from {@link #label}) when the mode is on;
	 * nothing otherwise. Allocates nothing.
	 * @param label the label's memory
	 */
	public static void mark(MemorySegment label) {
		if (ON) {
			try {
				MARK.invokeExact(label);
			}
			catch (Throwable ex) {
				throw new IllegalStateException("bench_mark_label failed", ex);
			}
		}
	}

}
