package dev.rdma.verbs.efa;

import dev.rdma.verbs.BitFlag;

/** {@code efadv_cq_init_attr.wc_flags}. */
public enum EfaWcFlag implements BitFlag {

	/**
	 * {@code EFADV_WC_EX_WITH_SGID}: the source GID of a completion whose source AH is
	 * unknown.
	 */
	SGID(1),
	/**
	 * {@code EFADV_WC_EX_WITH_IS_UNSOLICITED}: whether a receive completion is
	 * unsolicited (no matching work request). rdma-core 52+; rdma-core 44 refuses it with
	 * EOPNOTSUPP.
	 */
	IS_UNSOLICITED(1 << 1);

	private final long bit;

	EfaWcFlag(long bit) {
		this.bit = bit;
	}

	/** The bit of {@code efadv_cq_init_attr.wc_flags}. */
	@Override
	public long bit() {
		return bit;
	}

}
