package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A reusable native array of {@code struct ibv_wc} that
 * {@link CompletionQueue#poll(WorkCompletionBuffer)} fills: {@code ibv_poll_cq} writes
 * straight into it; an extended CQ copies the fields it was created with.
 *
 * <p>
 * {@link #get(int)} positions and returns the buffer's single {@link WorkCompletion} view
 * (no allocation): a view obtained earlier now shows the new index. Views are valid until
 * the next poll into this buffer.
 *
 * <p>
 * <b>Threads and lifetime.</b> One buffer per polling thread. A poll claims the buffer
 * for its duration: a poll into a buffer that another poll is filling (a handler polling
 * into its own poll's buffer, or a second thread) is refused with
 * {@link IllegalStateException} before anything is taken off the CQ, and so is a poll
 * into a closed buffer. {@link #close()} ends the buffer's use: from another thread it
 * first waits (up to 10 s) for a poll that is filling the buffer; from inside that poll's
 * handler it is refused. Reading a view of a closed buffer throws
 * {@link IllegalStateException}. The native memory (about 112 bytes per entry) is
 * returned once the buffer is unreachable, so that no read on another thread can ever
 * touch freed memory.
 */
public final class WorkCompletionBuffer implements AutoCloseable, CompletionBatch {

	// Beside the ibv_wc array, 40 bytes per entry for what ibv_wc has no room for: the
	// extended fields and the 32-bit slid of read_slid. This buffer's own layout: only
	// this class reads
	// or writes it.
	private static final long EXT_COMPLETION_TS = 0;

	private static final long EXT_WALLCLOCK = 8;

	private static final long EXT_TM_TAG = 16;

	private static final long EXT_TM_PRIV = 24;

	private static final long EXT_FLOW_TAG = 28;

	private static final long EXT_CVLAN = 32;

	private static final long EXT_SLID32 = 36;

	private static final long EXT_SIZE = 40;

	/*
	 * The memory is allocated by an automatic arena: close() makes the buffer refuse
	 * every use, and the memory is freed once the buffer is unreachable. No read of a
	 * view can therefore ever touch freed memory, even when another thread closes the
	 * buffer during the read; and the views read through the arena's segments, whose
	 * implicit session costs nothing to check (a shared arena's explicit close would cost
	 * a session check per field and measurably more: see docs/benchmarks-history.md).
	 */
	private final int capacity;

	/**
	 * The arena's segments, which the views read through (their session keeps the memory
	 * alive during a read).
	 */
	private final MemorySegment wcs;

	private final MemorySegment ext;

	/**
	 * The address of {@link #wcs}, as ibv_poll_cq takes it: valid while a poll has the
	 * buffer claimed.
	 */
	final long wcsAddress;

	/**
	 * Global-scope aliases {@link #copyCurrent} writes through while a poll has the
	 * buffer claimed.
	 */
	private final MemorySegment wcsView;

	private final MemorySegment extView;

	/**
	 * Held by the poll that fills the buffer (biased to the polling thread: no atomic per
	 * poll, see the class).
	 */
	private final ExclusiveSlot slot = new ExclusiveSlot();

	/**
	 * Set by close(): the views then throw (the memory itself stays valid until the
	 * buffer is unreachable).
	 */
	private boolean closed;

	private final Entry view = new Entry();

	private int size;

	/**
	 * {@link WcExFlag} bits valid in the current contents (of an extended CQ; unused
	 * while {@link #legacy}).
	 */
	long available;

	/**
	 * True when ibv_poll_cq filled it (every ibv_wc field is present, ext fields are
	 * not).
	 */
	boolean legacy = true;

	/**
	 * A buffer for up to {@code capacity} completions per poll (the {@code num_entries}
	 * of ibv_poll_cq).
	 */
	public WorkCompletionBuffer(int capacity) {
		if (capacity < 1 || capacity > 65536) {
			throw new IllegalArgumentException("capacity must be 1..65536, got " + capacity);
		}
		this.capacity = capacity;
		Arena arena = Arena.ofAuto();
		this.wcs = arena.allocate(Layouts.IBV_WC, capacity);
		this.ext = arena.allocate(EXT_SIZE * capacity, 8);
		this.wcsAddress = wcs.address();
		this.wcsView = Native.unscoped(wcs);
		this.extView = Native.unscoped(ext);
	}

	public int capacity() {
		return capacity;
	}

	/** Completions from the last poll. */
	@Override
	public int size() {
		return size;
	}

	/**
	 * After ibv_poll_cq wrote {@code n} entries: every ibv_wc field is valid, no extended
	 * field is.
	 */
	void filledByPollCq(int n) {
		legacy = true; // (available only counts for an extended CQ's contents)
		size = n;
	}

	/**
	 * After an extended CQ copied {@code n} completions with the fields of
	 * {@code wcFlags}.
	 */
	void filledByIterator(int n, long wcFlags) {
		legacy = false;
		available = wcFlags;
		size = n;
	}

	/**
	 * Copies the extended CQ's current completion (the iterator stands on it) into entry
	 * {@code i}: every {@code ibv_wc} field, read through {@code r} (or 0 when there is
	 * no reader, or the field is not valid on error), then the extended fields this
	 * buffer keeps beside the array (0 on error). Called by the poll that has the buffer
	 * claimed.
	 */
	void copyCurrent(int i, CqExReaders r) {
		MemorySegment wc = wcsView;
		MemorySegment x = extView;
		long base = i * Layouts.WC_SIZE;
		long eb = i * EXT_SIZE;
		int status = r.status();
		wc.set(JAVA_LONG, base + Layouts.WC_WR_ID, r.wrId());
		// One field after the other rather than zeroing the entry and looping over a
		// table of readers: straight-line
		// code is what the JIT compiles best here (docs/benchmarks-history.md, "What the
		// profiling changed")
		boolean ok = status == 0;
		wc.set(JAVA_INT, base + Layouts.WC_STATUS, status);
		wc.set(JAVA_INT, base + Layouts.WC_VENDOR_ERR, r.readVendorErr.address() != 0 ? r.vendorErr() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_QP_NUM, r.readQpNum.address() != 0 ? r.qpNum() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_OPCODE, ok && r.readOpcode.address() != 0 ? r.opcode() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_WC_FLAGS, ok && r.readWcFlags.address() != 0 ? r.wcFlagsOfCurrent() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_BYTE_LEN, ok && r.readByteLen.address() != 0 ? r.byteLen() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_IMM_DATA, ok && r.readImmData.address() != 0 ? r.immDataRaw() : 0);
		wc.set(JAVA_INT, base + Layouts.WC_SRC_QP, ok && r.readSrcQp.address() != 0 ? r.srcQp() : 0);
		wc.set(JAVA_LONG, base + Layouts.WC_PKEY_INDEX, 0L); // pkey_index, slid, sl,
																// dlid_path_bits: set
																// below if read
		x.set(JAVA_INT, eb + EXT_SLID32, ok && r.readSlid.address() != 0 ? r.slid() : 0);
		if (ok && r.readSl.address() != 0) {
			wc.set(JAVA_BYTE, base + Layouts.WC_SL, r.sl());
		}
		if (ok && r.readDlidPathBits.address() != 0) {
			wc.set(JAVA_BYTE, base + Layouts.WC_DLID_PATH_BITS, r.dlidPathBits());
		}
		if (!ok) {
			// not valid on error (ibv_poll_cq(3)): zero, not the previous completion's
			x.set(JAVA_LONG, eb + EXT_COMPLETION_TS, 0L);
			x.set(JAVA_LONG, eb + EXT_WALLCLOCK, 0L);
			x.set(JAVA_SHORT, eb + EXT_CVLAN, (short) 0);
			x.set(JAVA_INT, eb + EXT_FLOW_TAG, 0);
			x.set(JAVA_LONG, eb + EXT_TM_TAG, 0L);
			x.set(JAVA_INT, eb + EXT_TM_PRIV, 0);
			return;
		}
		if (r.readCompletionTs.address() != 0) {
			x.set(JAVA_LONG, eb + EXT_COMPLETION_TS, r.completionTimestamp());
		}
		if (r.readWallclock.address() != 0) {
			x.set(JAVA_LONG, eb + EXT_WALLCLOCK, r.completionWallclockNanos());
		}
		if (r.readCvlan.address() != 0) {
			x.set(JAVA_SHORT, eb + EXT_CVLAN, r.cvlan());
		}
		if (r.readFlowTag.address() != 0) {
			x.set(JAVA_INT, eb + EXT_FLOW_TAG, r.flowTag());
		}
		if (r.readTmInfo.address() != 0) {
			MemorySegment info = r.tmInfo();
			x.set(JAVA_LONG, eb + EXT_TM_TAG, info.get(JAVA_LONG, 0));
			x.set(JAVA_INT, eb + EXT_TM_PRIV, info.get(JAVA_INT, 8));
		}
	}

	/**
	 * Claims the buffer for a poll on this thread: refused, before the poll touches the
	 * CQ, when it is closed or another poll is filling it.
	 */
	void claim() {
		if (!slot.enter("a poll", this, false)) {
			throw new IllegalStateException("the work completion buffer is closed");
		}
	}

	void unclaim() {
		slot.exit();
	}

	private static IllegalStateException closedException() {
		return new IllegalStateException("the work completion buffer is closed");
	}

	/**
	 * The view positioned on completion {@code index} of the last poll (the same object
	 * every call).
	 */
	@Override
	public WorkCompletion get(int index) {
		if (closed) {
			throw closedException();
		}
		view.at(java.util.Objects.checkIndex(index, size)); // an intrinsic the JIT can
															// drop in a counted loop
		return view;
	}

	@Override
	public String toString() {
		return "WorkCompletionBuffer[capacity=" + capacity + (isClosed() ? ", closed]" : "]");
	}

	/** True once {@link #close()} has freed the native memory. */
	public boolean isClosed() {
		return slot.isClosed();
	}

	/**
	 * Ends the use of the buffer (its memory is returned once it is unreachable).
	 * Idempotent and thread-safe: waits (up to 10 s) for a poll on another thread that is
	 * filling the buffer.
	 * @throws IllegalStateException from inside the handler of a poll into this buffer,
	 * or when a poll on another thread keeps it for 10 s
	 */
	@Override
	public synchronized void close() {
		if (!slot.isClosed()) {
			slot.close("close", this);
			size = 0;
			closed = true;
		}
	}

	private final class Entry implements WorkCompletion {

		/**
		 * The completion shown; offsets are computed per read (one store per get(i), not
		 * two).
		 */
		private int index;

		private MemorySegment w() {
			if (closed) {
				throw closedException();
			}
			return wcs;
		}

		private MemorySegment x() {
			if (closed) {
				throw closedException();
			}
			return ext;
		}

		void at(int index) {
			this.index = index;
		}

		private void require(WcExFlag flag) {
			if (!legacy && (available & flag.bit()) == 0) {
				throw CqExReaders.notRequested(flag);
			}
		}

		private void requireExt(WcExFlag flag) {
			if (legacy || (available & flag.bit()) == 0) {
				throw CqExReaders.notRequested(flag);
			}
		}

		@Override
		public long wrId() {
			return w().get(JAVA_LONG, (index * Layouts.WC_SIZE) + Layouts.WC_WR_ID);
		}

		@Override
		public int statusCode() {
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_STATUS);
		}

		@Override
		public int opcodeCode() {
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_OPCODE);
		}

		@Override
		public int vendorErr() {
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_VENDOR_ERR);
		}

		@Override
		public int byteLen() {
			require(WcExFlag.BYTE_LEN);
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_BYTE_LEN);
		}

		@Override
		public int immData() {
			require(WcExFlag.IMM);
			return Integer.reverseBytes(w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_IMM_DATA));
		}

		@Override
		public int invalidatedRkey() {
			require(WcExFlag.IMM);
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_IMM_DATA);
		}

		@Override
		public int qpNum() {
			require(WcExFlag.QP_NUM);
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_QP_NUM);
		}

		@Override
		public int srcQp() {
			require(WcExFlag.SRC_QP);
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_SRC_QP);
		}

		@Override
		public int wcFlags() {
			return w().get(JAVA_INT, (index * Layouts.WC_SIZE) + Layouts.WC_WC_FLAGS);
		}

		@Override
		public int pkeyIndex() {
			if (!legacy) {
				throw new IllegalStateException(
						"pkey_index is not available from an extended CQ " + "(verbs.h has no ibv_wc_read_pkey_index)");
			}
			return w().get(JAVA_SHORT, (index * Layouts.WC_SIZE) + Layouts.WC_PKEY_INDEX) & 0xffff;
		}

		@Override
		public int slid() {
			require(WcExFlag.SLID);
			return legacy ? w().get(JAVA_SHORT, (index * Layouts.WC_SIZE) + Layouts.WC_SLID) & 0xffff
					: x().get(JAVA_INT, (index * EXT_SIZE) + EXT_SLID32);
		}

		@Override
		public int sl() {
			require(WcExFlag.SL);
			return w().get(JAVA_BYTE, (index * Layouts.WC_SIZE) + Layouts.WC_SL) & 0xff;
		}

		@Override
		public int dlidPathBits() {
			require(WcExFlag.DLID_PATH_BITS);
			return w().get(JAVA_BYTE, (index * Layouts.WC_SIZE) + Layouts.WC_DLID_PATH_BITS) & 0xff;
		}

		@Override
		public long completionTimestamp() {
			requireExt(WcExFlag.COMPLETION_TIMESTAMP);
			return x().get(JAVA_LONG, (index * EXT_SIZE) + EXT_COMPLETION_TS);
		}

		@Override
		public long completionWallclockNanos() {
			requireExt(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK);
			return x().get(JAVA_LONG, (index * EXT_SIZE) + EXT_WALLCLOCK);
		}

		@Override
		public int cvlan() {
			requireExt(WcExFlag.CVLAN);
			return x().get(JAVA_SHORT, (index * EXT_SIZE) + EXT_CVLAN) & 0xffff;
		}

		@Override
		public int flowTag() {
			requireExt(WcExFlag.FLOW_TAG);
			return x().get(JAVA_INT, (index * EXT_SIZE) + EXT_FLOW_TAG);
		}

		@Override
		public TmInfo tmInfo() {
			requireExt(WcExFlag.TM_INFO);
			return new TmInfo(x().get(JAVA_LONG, (index * EXT_SIZE) + EXT_TM_TAG),
					x().get(JAVA_INT, (index * EXT_SIZE) + EXT_TM_PRIV));
		}

		/*
		 * Overridden, not inherited: a default method's type profile is shared by every
		 * WorkCompletion class, so a JIT-compiled caller that only ever sees this class
		 * would still dispatch statusCode() & co. virtually once another class (legacy
		 * view, extended view, snapshot) has been used anywhere in the JVM.
		 */
		@Override
		public boolean isSuccess() {
			return statusCode() == 0;
		}

		@Override
		public WcStatus status() {
			return WcStatus.of(statusCode());
		}

		@Override
		public WcOpcode opcode() {
			return WcOpcode.of(opcodeCode());
		}

		@Override
		public boolean hasFlag(WcFlag flag) {
			return flag.isSet(wcFlags());
		}

		@Override
		public WorkCompletionSnapshot copy() {
			return Snapshots.of(this, legacy ? WcExFlag.STANDARD : available, legacy);
		}

		@Override
		public String toString() {
			return "WorkCompletion[wr_id=" + wrId() + ", status=" + status() + "]";
		}

	}

}
