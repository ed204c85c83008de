package dev.rdma.verbs;

/**
 * {@code enum ibv_wc_flags_ex} ({@code ibv_create_cq_wc_flags}): the completion fields an
 * extended CQ must provide. Only the fields requested at creation can be read from its
 * completions; reading another one throws.
 */
public enum WcExFlag implements BitFlag {

	/** {@code IBV_WC_EX_WITH_BYTE_LEN}: {@code ibv_wc_read_byte_len}. */
	BYTE_LEN(1L << 0),
	/**
	 * {@code IBV_WC_EX_WITH_IMM}: {@code ibv_wc_read_imm_data} and
	 * {@code ibv_wc_read_invalidated_rkey} (one reader, one slot).
	 */
	IMM(1L << 1),
	/** {@code IBV_WC_EX_WITH_QP_NUM}: {@code ibv_wc_read_qp_num}. */
	QP_NUM(1L << 2),
	/** {@code IBV_WC_EX_WITH_SRC_QP}: {@code ibv_wc_read_src_qp}. */
	SRC_QP(1L << 3),
	/** {@code IBV_WC_EX_WITH_SLID}: {@code ibv_wc_read_slid}. */
	SLID(1L << 4),
	/** {@code IBV_WC_EX_WITH_SL}: {@code ibv_wc_read_sl}. */
	SL(1L << 5),
	/** {@code IBV_WC_EX_WITH_DLID_PATH_BITS}: {@code ibv_wc_read_dlid_path_bits}. */
	DLID_PATH_BITS(1L << 6),
	/** {@code IBV_WC_EX_WITH_COMPLETION_TIMESTAMP}: {@code ibv_wc_read_completion_ts}. */
	COMPLETION_TIMESTAMP(1L << 7),
	/** {@code IBV_WC_EX_WITH_CVLAN}: {@code ibv_wc_read_cvlan}. */
	CVLAN(1L << 8),
	/** {@code IBV_WC_EX_WITH_FLOW_TAG}: {@code ibv_wc_read_flow_tag}. */
	FLOW_TAG(1L << 9),
	/** {@code IBV_WC_EX_WITH_TM_INFO}: {@code ibv_wc_read_tm_info}. */
	TM_INFO(1L << 10),
	/**
	 * {@code IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK}:
	 * {@code ibv_wc_read_completion_wallclock_ns}.
	 */
	COMPLETION_TIMESTAMP_WALLCLOCK(1L << 11);

	/**
	 * {@code IBV_WC_STANDARD_FLAGS}: the fields a legacy {@code struct ibv_wc} always
	 * has.
	 */
	public static final long STANDARD = 0x7f;

	/** {@code IBV_CREATE_CQ_SUP_WC_FLAGS}. */
	public static final long SUPPORTED = 0xfff;

	private final long bit;

	WcExFlag(long bit) {
		this.bit = bit;
	}

	/** The flag's value in {@code ibv_cq_init_attr_ex.wc_flags}. */
	@Override
	public long bit() {
		return bit;
	}

}
