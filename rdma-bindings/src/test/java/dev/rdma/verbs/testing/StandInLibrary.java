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

import dev.rdma.verbs.ffm.Layouts;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

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

	/**
	 * Makes {@code cq} (an {@code ibv_cq_ex}) and {@code efadv} (an {@code efadv_cq}) the
	 * stand-in's: {@link #expect expects} them, points their iterator and reader slots at
	 * the library's functions ({@code si_<slot>}), and sets the completion's wr_id
	 * ({@code 0xDEAD_BEEF_0000_0042}) and status (0).
	 */
	public static void install(MemorySegment cq, MemorySegment efadv) {
		expect(cq, efadv);
		for (String slot : new String[] { "start_poll", "next_poll", "end_poll", "read_opcode", "read_vendor_err",
				"read_byte_len", "read_imm_data", "read_qp_num", "read_src_qp", "read_wc_flags", "read_slid", "read_sl",
				"read_dlid_path_bits", "read_completion_ts", "read_cvlan", "read_flow_tag", "read_tm_info",
				"read_completion_wallclock_ns" }) {
			cq.set(ADDRESS, Layouts.off(Layouts.IBV_CQ_EX, slot), fn("si_" + slot));
		}
		efadv.set(ADDRESS, Layouts.off(Layouts.EFADV_CQ, "wc_read_sgid"), fn("si_wc_read_sgid"));
		efadv.set(ADDRESS, Layouts.EFADV_CQ_WC_IS_UNSOLICITED, fn("si_wc_is_unsolicited"));
		cq.set(JAVA_LONG, Layouts.CQ_EX_WR_ID, 0xDEAD_BEEF_0000_0042L);
		cq.set(JAVA_INT, Layouts.CQ_EX_STATUS, 0);
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
