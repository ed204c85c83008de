package dev.rdma.verbs;

import java.util.Set;

/** {@code enum ibv_create_cq_attr_flags} of {@code ibv_cq_init_attr_ex.flags}. */
public enum CqCreateFlag {

	/** The CQ is used from a single thread: the provider may skip its locks. */
	SINGLE_THREADED(1),
	/**
	 * The CQ does not go to the error state on overrun; completions are overwritten. The
	 * application must make sure the CQ never overflows, otherwise completions are lost
	 * silently.
	 */
	IGNORE_OVERRUN(1 << 1);

	private final int bit;

	CqCreateFlag(int bit) {
		this.bit = bit;
	}

	public int bit() {
		return bit;
	}

	public static int mask(Set<CqCreateFlag> flags) {
		int m = 0;
		for (CqCreateFlag f : flags) {
			m |= f.bit;
		}
		return m;
	}

}
