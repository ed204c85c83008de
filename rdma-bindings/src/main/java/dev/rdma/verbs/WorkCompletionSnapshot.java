package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

/**
 * An immutable copy of a {@link WorkCompletion}. Fields the source could not provide (not
 * requested on an extended CQ) are 0/null; {@link #availableWcExFlags()} says which were
 * provided.
 */
public record WorkCompletionSnapshot(long wrId, int statusCode, int opcodeCode, int vendorErr, int byteLen, int immData,
		int qpNum, int srcQp, int wcFlags, int pkeyIndex, int slid, int sl, int dlidPathBits, long completionTimestamp,
		long completionWallclockNanos, int cvlan, int flowTag, @Nullable TmInfo tmInfo,
		long availableWcExFlags) implements WorkCompletion {

	@Override
	public int invalidatedRkey() {
		return immData;
	}

	@Override
	public WorkCompletionSnapshot copy() {
		return this;
	}

	// overridden, not inherited, like the views' (one shared default-method profile would
	// make callers dispatch virtually)
	@Override
	public boolean isSuccess() {
		return statusCode == 0;
	}

	@Override
	public WcStatus status() {
		return WcStatus.of(statusCode);
	}

	@Override
	public WcOpcode opcode() {
		return WcOpcode.of(opcodeCode);
	}

	@Override
	public boolean hasFlag(WcFlag flag) {
		return flag.isSet(wcFlags);
	}

	static WorkCompletionSnapshot of(WorkCompletion wc, long available, boolean legacy) {
		boolean ok = wc.isSuccess();
		return new WorkCompletionSnapshot(wc.wrId(), wc.statusCode(), ok ? wc.opcodeCode() : 0, wc.vendorErr(),
				ok && has(available, WcExFlag.BYTE_LEN) ? wc.byteLen() : 0,
				ok && has(available, WcExFlag.IMM) ? wc.immData() : 0, has(available, WcExFlag.QP_NUM) ? wc.qpNum() : 0,
				ok && has(available, WcExFlag.SRC_QP) ? wc.srcQp() : 0, ok ? wc.wcFlags() : 0,
				ok && legacy ? wc.pkeyIndex() : 0, ok && has(available, WcExFlag.SLID) ? wc.slid() : 0,
				ok && has(available, WcExFlag.SL) ? wc.sl() : 0,
				ok && has(available, WcExFlag.DLID_PATH_BITS) ? wc.dlidPathBits() : 0,
				ok && has(available, WcExFlag.COMPLETION_TIMESTAMP) ? wc.completionTimestamp() : 0,
				ok && has(available, WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK) ? wc.completionWallclockNanos() : 0,
				ok && has(available, WcExFlag.CVLAN) ? wc.cvlan() : 0,
				ok && has(available, WcExFlag.FLOW_TAG) ? wc.flowTag() : 0,
				ok && has(available, WcExFlag.TM_INFO) ? wc.tmInfo() : null, available);
	}

	private static boolean has(long available, WcExFlag flag) {
		return (available & flag.bit()) != 0;
	}
}
