package dev.rdma.spring.boot.autoconfigure;

import dev.rdma.verbs.efa.EfaWcFlag;

/**
 * Fields an EFA CQ provides on top of the wc-flags ({@code efadv_cq_init_attr.wc_flags}).
 */
public enum EfaWcField {

	/** The source GID of a completion whose address handle is unknown. */
	SGID(EfaWcFlag.SGID),
	/** Whether a receive completion is unsolicited (rdma-core 52+). */
	UNSOLICITED(EfaWcFlag.IS_UNSOLICITED);

	private final EfaWcFlag flag;

	EfaWcField(EfaWcFlag flag) {
		this.flag = flag;
	}

	public EfaWcFlag flag() {
		return flag;
	}

}
