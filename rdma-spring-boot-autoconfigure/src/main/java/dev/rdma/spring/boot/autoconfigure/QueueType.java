package dev.rdma.spring.boot.autoconfigure;

/** Kind of completion queue. */
public enum QueueType {

	/** {@code ibv_create_cq}, polled with {@code ibv_poll_cq}. */
	LEGACY,
	/**
	 * {@code ibv_create_cq_ex}, polled with the start/next/end iterator; fields chosen
	 * with wc-flags.
	 */
	EXTENDED,
	/** {@code efadv_create_cq} (AWS EFA devices only). */
	EFA

}
