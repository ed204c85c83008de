package dev.rdma.verbs.efa;

import java.util.Set;

/** {@code efadv_cq_init_attr.wc_flags}. */
public enum EfaWcFlag {

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
	public long bit() {
		return bit;
	}

	/** The bits of {@code flags} or'ed together. */
	public static long mask(Set<EfaWcFlag> flags) {
		long m = 0;
		for (EfaWcFlag f : flags) {
			m |= f.bit;
		}
		return m;
	}

}
