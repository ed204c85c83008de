package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Efa;

/**
 * Entry point: is libibverbs here, is libefa here, which rdma-core generation is
 * installed.
 *
 * <p>
 * Loading happens once, by soname ({@code libibverbs.so.1}, {@code libefa.so.1}), on
 * first use. A missing libibverbs makes every entry point throw
 * {@link RdmaUnavailableException}; a missing libefa only disables the EFA completion
 * queues of {@code dev.rdma.verbs.efa}.
 */
public final class Rdma {

	/** Debian/Ubuntu packages that provide the runtime libraries. */
	public static final String RUNTIME_PACKAGES = "libibverbs1 ibverbs-providers";

	private Rdma() {
	}

	/** True when libibverbs.so.1 was loaded. */
	public static boolean isAvailable() {
		return Ibverbs.LIB.isPresent() && Ibverbs.GET_DEVICE_LIST != null;
	}

	/**
	 * True when libefa.so.1 was loaded (EFA CQs can be asked for; only an EFA device
	 * grants them).
	 */
	public static boolean isEfaAvailable() {
		return isAvailable() && Efa.available();
	}

	/** Why libibverbs could not be loaded, or null when it was. */
	public static @Nullable String unavailableReason() {
		if (isAvailable()) {
			return null;
		}
		if (Native.UNSUPPORTED_ARCH != null) {
			return Native.UNSUPPORTED_ARCH;
		}
		return "cannot load " + Ibverbs.SONAME + " (rdma-core): install the packages " + RUNTIME_PACKAGES
				+ " (apt-get install " + RUNTIME_PACKAGES + ")"
				+ (Ibverbs.LOAD_FAILURE == null ? "" : "; " + Ibverbs.LOAD_FAILURE.getMessage());
	}

	/**
	 * Throws {@link RdmaUnavailableException} naming the packages to install when
	 * libibverbs is missing.
	 */
	public static void requireLibrary() {
		if (!isAvailable()) {
			throw new RdmaUnavailableException(unavailableReason(), Ibverbs.LOAD_FAILURE);
		}
	}

	/**
	 * True when an extended CQ of the installed Soft-RoCE (rxe) provider may be drained
	 * the documented way, {@code next_poll} until ENOENT and then {@code end_poll}. rxe
	 * before rdma-core 55 corrupts its consumer index on that ENOENT and hands out
	 * phantom completions; the binding then polls one completion per
	 * {@code start_poll ... end_poll} on rxe (see {@link ExtendedCompletionQueue}).
	 * Detected conservatively from libefa's symbol set: true from rdma-core 59 on
	 * ({@code efadv_query_cq}), false for 55-58 as well.
	 */
	public static boolean softRoceDrainIsSafe() {
		return Efa.RDMA_CORE_59_OR_NEWER;
	}

}
