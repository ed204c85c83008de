package dev.rdma.verbs;

import java.util.Set;

/**
 * {@code enum ibv_wc_flags_ex} ({@code ibv_create_cq_wc_flags}): the completion fields an
 * extended CQ must provide. Only the fields requested at creation can be read from its
 * completions; reading another one throws.
 */
public enum WcExFlag {

	BYTE_LEN(1L << 0), IMM(1L << 1), QP_NUM(1L << 2), SRC_QP(1L << 3), SLID(1L << 4), SL(1L << 5),
	DLID_PATH_BITS(1L << 6), COMPLETION_TIMESTAMP(1L << 7), CVLAN(1L << 8), FLOW_TAG(1L << 9), TM_INFO(1L << 10),
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

	public long bit() {
		return bit;
	}

	public static long mask(Set<WcExFlag> flags) {
		long m = 0;
		for (WcExFlag f : flags) {
			m |= f.bit;
		}
		return m;
	}

}
