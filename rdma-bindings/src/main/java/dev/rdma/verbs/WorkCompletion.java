package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

/**
 * One work completion: a view over a native {@code struct ibv_wc} (legacy CQs,
 * {@link WorkCompletionBuffer}) or over the current completion of an extended CQ's
 * iterator ({@code ibv_start_poll}/{@code ibv_next_poll}).
 *
 * <p>
 * <b>Lifetime.</b> A view is valid only inside the callback (or until the next poll of
 * its buffer) that handed it out: the same object is reused for the next completion, and
 * the native memory behind it is overwritten. Fields are read lazily, from native memory,
 * when called. Call {@link #copy()} to keep a completion.
 *
 * <p>
 * <b>Validity.</b> When {@link #status()} is not {@link WcStatus#SUCCESS}, only
 * {@link #wrId()}, {@link #status()}, {@link #qpNum()} and {@link #vendorErr()} are
 * meaningful; the other fields are undefined (rdma-core's rule). On an extended CQ,
 * reading a field whose {@link WcExFlag} was not requested at creation throws
 * {@link IllegalStateException} (the provider's reader for it may be a NULL pointer).
 *
 * <p>
 * Not thread-safe: use a view on the thread that polled it.
 */
public interface WorkCompletion {

	/** {@code wr_id}: the caller's id of the work request. */
	long wrId();

	/** {@code status} as a number ({@code enum ibv_wc_status}). */
	int statusCode();

	/** {@code status}. */
	default WcStatus status() {
		return WcStatus.of(statusCode());
	}

	default boolean isSuccess() {
		return statusCode() == 0;
	}

	/** {@code opcode} as a number ({@code ibv_wc_read_opcode} on extended CQs). */
	int opcodeCode();

	default WcOpcode opcode() {
		return WcOpcode.of(opcodeCode());
	}

	/** {@code vendor_err} ({@code ibv_wc_read_vendor_err}). */
	int vendorErr();

	/**
	 * {@code byte_len}, unsigned ({@code ibv_wc_read_byte_len}; extended CQs need
	 * {@link WcExFlag#BYTE_LEN}).
	 */
	int byteLen();

	/**
	 * {@code ibv_wc.imm_data} ({@code ibv_wc_read_imm_data} on extended CQs), converted
	 * to host order (the verb gives it in network order). Valid when
	 * {@link WcFlag#WITH_IMM} is set. Extended CQs need {@link WcExFlag#IMM}.
	 */
	int immData();

	/**
	 * {@code ibv_wc.invalidated_rkey} ({@code ibv_wc_read_invalidated_rkey} on extended
	 * CQs), host order as the provider stores it in {@code imm_data}'s slot (no
	 * conversion); valid when {@link WcFlag#WITH_INV} is set. Extended CQs need
	 * {@link WcExFlag#IMM}.
	 */
	int invalidatedRkey();

	/**
	 * {@code ibv_wc.qp_num} ({@code ibv_wc_read_qp_num} on extended CQs): the local QP of
	 * the completed work request; valid on error too. Extended CQs need
	 * {@link WcExFlag#QP_NUM}.
	 */
	int qpNum();

	/**
	 * {@code ibv_wc.src_qp} ({@code ibv_wc_read_src_qp} on extended CQs): the remote QP
	 * (UD only). Extended CQs need {@link WcExFlag#SRC_QP}.
	 */
	int srcQp();

	/**
	 * {@code ibv_wc.wc_flags} ({@code ibv_wc_read_wc_flags} on extended CQs, always
	 * available): bits of {@link WcFlag}.
	 */
	int wcFlags();

	default boolean hasFlag(WcFlag flag) {
		return flag.isSet(wcFlags());
	}

	/**
	 * {@code pkey_index} (GSI QPs only). Legacy completions only: verbs.h has no extended
	 * reader for it.
	 */
	int pkeyIndex();

	/**
	 * {@code slid}: u16 in {@code ibv_wc}, u32 from {@code ibv_wc_read_slid}. Extended:
	 * {@link WcExFlag#SLID}.
	 */
	int slid();

	/**
	 * {@code ibv_wc.sl} ({@code ibv_wc_read_sl} on extended CQs), u8. Extended CQs need
	 * {@link WcExFlag#SL}.
	 */
	int sl();

	/**
	 * {@code ibv_wc.dlid_path_bits} ({@code ibv_wc_read_dlid_path_bits} on extended CQs),
	 * u8. Extended CQs need {@link WcExFlag#DLID_PATH_BITS}.
	 */
	int dlidPathBits();

	/**
	 * {@code ibv_wc_read_completion_ts}, HCA clock units. Needs
	 * {@link WcExFlag#COMPLETION_TIMESTAMP}.
	 */
	long completionTimestamp();

	/**
	 * {@code ibv_wc_read_completion_wallclock_ns}. Needs
	 * {@link WcExFlag#COMPLETION_TIMESTAMP_WALLCLOCK}.
	 */
	long completionWallclockNanos();

	/** {@code ibv_wc_read_cvlan}, u16. Needs {@link WcExFlag#CVLAN}. */
	int cvlan();

	/** {@code ibv_wc_read_flow_tag}. Needs {@link WcExFlag#FLOW_TAG}. */
	int flowTag();

	/**
	 * {@code ibv_wc_read_tm_info}. Needs {@link WcExFlag#TM_INFO}. Allocates the result.
	 */
	TmInfo tmInfo();

	/**
	 * An immutable copy of every field this completion can provide, for callers that keep
	 * it.
	 */
	WorkCompletionSnapshot copy();

}
