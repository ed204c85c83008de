package dev.rdma.verbs;

/**
 * {@code enum ibv_create_cq_attr_flags} of {@code ibv_cq_init_attr_ex.flags}
 * ({@link CqInitAttributes#flags()}); a non-empty set also sets
 * {@code IBV_CQ_INIT_ATTR_MASK_FLAGS} in {@code comp_mask}.
 */
public enum CqCreateFlag implements BitFlag {

	/**
	 * {@code IBV_CREATE_CQ_ATTR_SINGLE_THREADED} (1): the CQ is used from a single
	 * thread: the provider may skip its locks (the binding still runs the polls and
	 * resizes of one CQ one at a time, and a close of one of its QPs on another thread,
	 * whose {@code ibv_destroy_qp} cleans the CQ, waits for them; such a close takes the
	 * CQ's slot from another thread, so from then on each poll of the CQ enters it with a
	 * compare-and-set instead of the polling thread's plain store).
	 */
	SINGLE_THREADED(1),
	/**
	 * {@code IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN} (2): the CQ does not go to the error
	 * state on overrun; completions are overwritten. The application must make sure the
	 * CQ never overflows, otherwise completions are lost silently.
	 */
	IGNORE_OVERRUN(1 << 1);

	private final long bit;

	CqCreateFlag(long bit) {
		this.bit = bit;
	}

	/** The flag's value in {@code ibv_cq_init_attr_ex.flags}. */
	@Override
	public long bit() {
		return bit;
	}

}
