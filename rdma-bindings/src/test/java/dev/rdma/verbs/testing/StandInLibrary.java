package dev.rdma.verbs.testing;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The provider stand-in of the host tests: {@code stand-in/cq_stand_in.c} (test
 * resources), compiled once per JVM with gcc into a temporary shared library. Its
 * functions have the signatures of {@code struct ibv_cq_ex}'s iterator and readers and of
 * {@code struct efadv_cq}'s readers, return known values and record each call; being
 * native code, the binding calls them through the same critical downcalls as a real
 * provider's.
 */
public final class StandInLibrary {

	private static final SymbolLookup LIB = load();

	private static final MethodHandle CALLS = Linker.nativeLinker()
		.downcallHandle(fn("si_calls"), FunctionDescriptor.of(ADDRESS));

	private static final MethodHandle CLEAR = Linker.nativeLinker()
		.downcallHandle(fn("si_clear"), FunctionDescriptor.ofVoid());

	private StandInLibrary() {
	}

	private static SymbolLookup load() {
		try {
			Path dir = Files.createTempDirectory("cq-stand-in");
			Path source = dir.resolve("cq_stand_in.c");
			try (InputStream in = StandInLibrary.class.getResourceAsStream("/stand-in/cq_stand_in.c")) {
				if (in == null) {
					throw new IllegalStateException("stand-in/cq_stand_in.c is not on the test class path");
				}
				Files.copy(in, source);
			}
			Path lib = dir.resolve("libcq_stand_in.so");
			Process gcc = new ProcessBuilder("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o",
					lib.toString(), source.toString())
				.redirectErrorStream(true)
				.start();
			String output = new String(gcc.getInputStream().readAllBytes());
			if (!gcc.waitFor(60, TimeUnit.SECONDS) || gcc.exitValue() != 0) {
				throw new IllegalStateException("gcc failed on cq_stand_in.c: " + output);
			}
			return SymbolLookup.libraryLookup(lib, Arena.global());
		}
		catch (IOException e) {
			throw new IllegalStateException("cannot build the provider stand-in (gcc is needed for the tests)", e);
		}
		catch (InterruptedException e) {
			Thread.currentThread().interrupt();
			throw new IllegalStateException(e);
		}
	}

	/** The address of the stand-in's function (or global) {@code name}. */
	public static MemorySegment fn(String name) {
		return LIB.find(name).orElseThrow(() -> new IllegalStateException("no " + name + " in the stand-in"));
	}

	private static MemorySegment global(String name, long size) {
		return fn(name).reinterpret(size);
	}

	/**
	 * Sets the CQ and efadv_cq pointers every call must carry (a call with another counts
	 * as bad).
	 */
	public static void expect(MemorySegment cq, MemorySegment efadvCq) {
		global("si_cq", 8).set(ADDRESS, 0, cq);
		global("si_dv", 8).set(ADDRESS, 0, efadvCq);
	}

	/** How many more start_poll/next_poll calls return a completion (then ENOENT). */
	public static void remaining(int n) {
		global("si_remaining", 4).set(JAVA_INT, 0, n);
	}

	/**
	 * A provider failure: after {@code after} more {@code start_poll}/{@code next_poll}
	 * calls (each as {@link #remaining(int)} says), the next one returns {@code code}
	 * instead, once. {@link #clear()} cancels it.
	 */
	public static void failAfter(int after, int code) {
		global("si_fail_code", 4).set(JAVA_INT, 0, code);
		global("si_fail_after", 4).set(JAVA_INT, 0, after);
	}

	/**
	 * Calls made with a wrong CQ pointer or a non-zero {@code ibv_poll_cq_attr.comp_mask}
	 * since the last clear.
	 */
	public static int badCalls() {
		return global("si_bad", 4).get(JAVA_INT, 0);
	}

	/** The slots called since the last {@link #clear()}, in order. */
	public static List<String> calls() {
		try {
			String text = ((MemorySegment) CALLS.invokeExact()).reinterpret(Long.MAX_VALUE).getString(0);
			return text.isEmpty() ? List.of() : Arrays.asList(text.split("\n"));
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Forgets the recorded calls and bad calls, and cancels a {@link #failAfter} failure.
	 */
	public static void clear() {
		try {
			CLEAR.invokeExact();
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

}
