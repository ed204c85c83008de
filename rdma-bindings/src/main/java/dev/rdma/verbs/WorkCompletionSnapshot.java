package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

/**
 * An immutable copy of a {@link WorkCompletion} ({@link WorkCompletion#copy()}), with the
 * same accessors. A plain value: it does not implement {@link WorkCompletion}, whose
 * instances are views valid only during their callback. Fields the source could not
 * provide (not requested on an extended CQ) are 0/null; {@link #availableWcExFlags()}
 * says which were provided.
 */
public record WorkCompletionSnapshot(long wrId, int statusCode, int opcodeCode, int vendorErr, int byteLen, int immData,
		int qpNum, int srcQp, int wcFlags, int pkeyIndex, int slid, int sl, int dlidPathBits, long completionTimestamp,
		long completionWallclockNanos, int cvlan, int flowTag, @Nullable TmInfo tmInfo, long availableWcExFlags) {

	/**
	 * {@code invalidated_rkey} ({@code ibv_wc_read_invalidated_rkey} on extended CQs),
	 * host order, as {@link WorkCompletion#invalidatedRkey()} reads it: valid when
	 * {@link WcFlag#WITH_INV} is set. It shares {@code imm_data}'s slot, which the
	 * provider fills in host order for a WITH_INV completion, while {@link #immData()}
	 * holds that slot converted from network order: this is {@link #immData()} with its
	 * bytes reversed back.
	 */
	public int invalidatedRkey() {
		return Integer.reverseBytes(immData);
	}

	/** {@code status == IBV_WC_SUCCESS}. */
	public boolean isSuccess() {
		return statusCode == 0;
	}

	/** {@code status}. */
	public WcStatus status() {
		return WcStatus.of(statusCode);
	}

	/** {@code opcode}. */
	public WcOpcode opcode() {
		return WcOpcode.of(opcodeCode);
	}

	/** Whether {@code wc_flags} has {@code flag}. */
	public boolean hasFlag(WcFlag flag) {
		return flag.isSet(wcFlags);
	}

}
