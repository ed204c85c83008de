package dev.rdma.verbs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The {@code ibv_wc_read_*} functions of one extended CQ, read once from its
 * {@code struct ibv_cq_ex} at creation, and the downcalls that call them (critical: a
 * reader returns a field of the completion the iterator stands on). The reader of a field
 * whose {@link WcExFlag} was not requested is NULL (the provider may leave it NULL) and
 * is never called: its typed accessor throws first.
 *
 * <p>
 * Valid only between a successful {@code start_poll} and its {@code end_poll}, on the
 * thread that holds the CQ's exclusive slot; the callers ({@link ExtendedCompletionView},
 * {@link WorkCompletionBuffer#copyCurrent}) check that.
 */
final class CqExReaders {

	/** The {@code struct ibv_cq_ex *}, as the downcalls take it. */
	private final long cq;

	/**
	 * The CQ's memory: {@code status} and {@code wr_id} of the current completion are
	 * plain fields.
	 */
	private final MemorySegment cqMemory;

	private final long wcFlags;

	final MemorySegment readOpcode;

	final MemorySegment readVendorErr;

	final MemorySegment readByteLen;

	final MemorySegment readImmData;

	final MemorySegment readQpNum;

	final MemorySegment readSrcQp;

	final MemorySegment readWcFlags;

	final MemorySegment readSlid;

	final MemorySegment readSl;

	final MemorySegment readDlidPathBits;

	final MemorySegment readCompletionTs;

	final MemorySegment readCvlan;

	final MemorySegment readFlowTag;

	final MemorySegment readTmInfo;

	final MemorySegment readWallclock;

	/**
	 * 16 bytes of native scratch for {@code read_tm_info}, owned by the CQ (freed when it
	 * is destroyed).
	 */
	private final MemorySegment scratch16;

	CqExReaders(MemorySegment cqEx, long wcFlags, MemorySegment scratch16) {
		this.cq = cqEx.address();
		this.cqMemory = cqEx;
		this.wcFlags = wcFlags;
		this.scratch16 = scratch16;
		StructLayout l = Layouts.IBV_CQ_EX;
		this.readOpcode = fn(cqEx, l, "read_opcode", -1);
		this.readVendorErr = fn(cqEx, l, "read_vendor_err", -1);
		this.readWcFlags = fn(cqEx, l, "read_wc_flags", -1);
		this.readByteLen = fn(cqEx, l, "read_byte_len", WcExFlag.BYTE_LEN.bit());
		this.readImmData = fn(cqEx, l, "read_imm_data", WcExFlag.IMM.bit());
		this.readQpNum = fn(cqEx, l, "read_qp_num", WcExFlag.QP_NUM.bit());
		this.readSrcQp = fn(cqEx, l, "read_src_qp", WcExFlag.SRC_QP.bit());
		this.readSlid = fn(cqEx, l, "read_slid", WcExFlag.SLID.bit());
		this.readSl = fn(cqEx, l, "read_sl", WcExFlag.SL.bit());
		this.readDlidPathBits = fn(cqEx, l, "read_dlid_path_bits", WcExFlag.DLID_PATH_BITS.bit());
		this.readCompletionTs = fn(cqEx, l, "read_completion_ts", WcExFlag.COMPLETION_TIMESTAMP.bit());
		this.readCvlan = fn(cqEx, l, "read_cvlan", WcExFlag.CVLAN.bit());
		this.readFlowTag = fn(cqEx, l, "read_flow_tag", WcExFlag.FLOW_TAG.bit());
		this.readTmInfo = fn(cqEx, l, "read_tm_info", WcExFlag.TM_INFO.bit());
		this.readWallclock = fn(cqEx, l, "read_completion_wallclock_ns", WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK.bit());
	}

	/**
	 * The reader at {@code field}, or NULL when its flag was not requested (never called
	 * then).
	 */
	private MemorySegment fn(MemorySegment cqEx, StructLayout l, String field, long requiredFlag) {
		if (requiredFlag != -1 && (wcFlags & requiredFlag) == 0) {
			return MemorySegment.NULL;
		}
		return cqEx.get(ADDRESS, Layouts.off(l, field));
	}

	static IllegalStateException notRequested(WcExFlag flag) {
		return new IllegalStateException("work completion field " + flag + " was not requested: create the CQ with "
				+ "wc_flags including IBV_WC_EX_WITH_" + flag);
	}

	// ---- the plain fields of the current completion

	long wrId() {
		return cqMemory.get(JAVA_LONG, Layouts.CQ_EX_WR_ID);
	}

	int status() {
		return cqMemory.get(JAVA_INT, Layouts.CQ_EX_STATUS);
	}

	// ---- the readers; each one of a few bytecodes, so the JIT inlines it at every call
	// site

	int opcode() {
		return readInt(readOpcode);
	}

	int vendorErr() {
		return readInt(readVendorErr);
	}

	int wcFlagsOfCurrent() {
		return readInt(readWcFlags);
	}

	int byteLen() {
		return readInt(readByteLen);
	}

	/**
	 * {@code read_imm_data} as the provider returns it: network order (also the
	 * invalidated rkey, host order).
	 */
	int immDataRaw() {
		return readInt(readImmData);
	}

	int qpNum() {
		return readInt(readQpNum);
	}

	int srcQp() {
		return readInt(readSrcQp);
	}

	int slid() {
		return readInt(readSlid);
	}

	byte sl() {
		return readByte(readSl);
	}

	byte dlidPathBits() {
		return readByte(readDlidPathBits);
	}

	long completionTimestamp() {
		return readLong(readCompletionTs);
	}

	long completionWallclockNanos() {
		return readLong(readWallclock);
	}

	short cvlan() {
		return readShort(readCvlan);
	}

	int flowTag() {
		return readInt(readFlowTag);
	}

	/**
	 * {@code read_tm_info} into the CQ's scratch: tag at 0, priv at 8; valid until the
	 * next call.
	 */
	MemorySegment tmInfo() {
		try {
			Ibverbs.FP_READ_TM_INFO.invokeExact(readTmInfo, cq, scratch16.address());
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
		return scratch16;
	}

	int readInt(MemorySegment fn) {
		try {
			return (int) Ibverbs.FP_INT_OF_CQ.invokeExact(fn, cq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	private long readLong(MemorySegment fn) {
		try {
			return (long) Ibverbs.FP_LONG_OF_CQ.invokeExact(fn, cq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	private short readShort(MemorySegment fn) {
		try {
			return (short) Ibverbs.FP_SHORT_OF_CQ.invokeExact(fn, cq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	private byte readByte(MemorySegment fn) {
		try {
			return (byte) Ibverbs.FP_BYTE_OF_CQ.invokeExact(fn, cq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

}
