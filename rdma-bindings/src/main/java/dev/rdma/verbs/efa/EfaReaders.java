package dev.rdma.verbs.efa;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.rdma.verbs.ffm.Efa;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The readers of {@code struct efadv_cq} ({@code efadvCq}): {@code efadv_wc_read_sgid}
 * and {@code efadv_wc_is_unsolicited}, each read only when the CQ was created with its
 * {@link EfaWcFlag} (NULL otherwise, and never called). Valid, like the CQ's
 * {@code ibv_wc_read_*} readers, only while the CQ's iterator stands on a completion, on
 * the thread that polls ({@link EfaCompletionQueue} checks that).
 */
final class EfaReaders {

	private final long efaFlags;

	private final MemorySegment efadvCq;

	private final MemorySegment readSgid;

	private final MemorySegment readUnsolicited;

	/**
	 * 16 bytes for the GID, freed by the GC once the CQ is unreachable (an automatic
	 * arena: the CQ needs no destroy hook for it). This field keeps the memory reachable;
	 * the downcalls use {@link #gid}, an unscoped view of it.
	 */
	private final MemorySegment gidMemory = Arena.ofAuto().allocate(16, 8);

	private final MemorySegment gid = Native.unscoped(gidMemory);

	/**
	 * @param efadvCq the {@code struct efadv_cq} (24 bytes readable: rdma-core 52+
	 * layout)
	 */
	EfaReaders(MemorySegment efadvCq, long efaFlags) {
		this.efaFlags = efaFlags;
		this.efadvCq = efadvCq;
		this.readSgid = (efaFlags & EfaWcFlag.SGID.bit()) == 0 ? MemorySegment.NULL
				: efadvCq.get(ADDRESS, Layouts.off(Layouts.EFADV_CQ, "wc_read_sgid"));
		this.readUnsolicited = (efaFlags & EfaWcFlag.IS_UNSOLICITED.bit()) == 0 ? MemorySegment.NULL
				: efadvCq.get(ADDRESS, Layouts.EFADV_CQ_WC_IS_UNSOLICITED);
	}

	static IllegalStateException notGranted(EfaWcFlag flag) {
		return new IllegalStateException("EFA completion field " + flag + " is not available: create the CQ with "
				+ "efadv_create_cq and EFADV_WC_EX_WITH_" + flag);
	}

	long flags() {
		return efaFlags;
	}

	long efadvCqAddress() {
		return efadvCq.address();
	}

	boolean hasSgid() {
		return readSgid.address() != 0;
	}

	boolean hasUnsolicited() {
		return readUnsolicited.address() != 0;
	}

	/**
	 * {@code efadv_wc_read_sgid} into the 16-byte scratch {@link #gid()}: true when the
	 * provider knew it.
	 */
	boolean readSgid() {
		if (readSgid.address() == 0) {
			throw notGranted(EfaWcFlag.SGID);
		}
		try {
			return (int) Efa.FP_WC_READ_SGID.invokeExact(readSgid, efadvCq, gid) == 0;
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** The scratch {@link #readSgid()} fills. */
	MemorySegment gid() {
		return gid;
	}

	/** {@code efadv_wc_is_unsolicited}. */
	boolean isUnsolicited() {
		if (readUnsolicited.address() == 0) {
			throw notGranted(EfaWcFlag.IS_UNSOLICITED);
		}
		try {
			return (boolean) Efa.FP_WC_IS_UNSOLICITED.invokeExact(readUnsolicited, efadvCq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

}
