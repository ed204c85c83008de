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
	 * the documented way, {@code ibv_next_poll} until ENOENT and then
	 * {@code ibv_end_poll}. rxe has two bugs on that path: before rdma-core 55 it
	 * corrupts its consumer index on that ENOENT and hands out phantom completions; and
	 * before rdma-core 59 its {@code next_poll} unlocks the CQ's spinlock on ENOENT, so
	 * that {@code end_poll} unlocks it a second time (fixed in v59, backported to v44.12;
	 * see the project's ABI note). 59 is therefore the exact cut-off, not a conservative
	 * one: on 55-58 the double unlock remains. When false the binding polls one
	 * completion per {@code start_poll ... end_poll} on rxe (see
	 * {@link ExtendedCompletionQueue}). Detected from libefa's symbol set:
	 * {@code efadv_query_cq} appeared in rdma-core 59. (v44.12 has the unlock fix
	 * backported but not the consumer-index fix: false is right for it too.)
	 */
	public static boolean softRoceDrainIsSafe() {
		return Efa.RDMA_CORE_59_OR_NEWER;
	}

}
