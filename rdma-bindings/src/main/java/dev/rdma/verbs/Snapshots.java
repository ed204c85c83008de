package dev.rdma.verbs;

/**
 * Copies a {@link WorkCompletion} view into a {@link WorkCompletionSnapshot} (what the
 * views' {@code copy()} calls): kept apart so that the snapshot, a plain value, does not
 * depend on the view interface that returns it.
 */
final class Snapshots {

	private Snapshots() {
	}

	/**
	 * @param available the {@link WcExFlag} bits {@code wc} can provide
	 * @param legacy whether {@code wc} is an {@code ibv_wc} of {@code ibv_poll_cq}
	 */
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
