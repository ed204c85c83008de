package dev.rdma.spring.boot.autoconfigure;

/** How a connection's queue pairs are connected to their peers. */
public enum ConnectionExchange {

	/**
	 * rdma_cm: listen and connect are addresses of the RDMA netdevs (the default).
	 */
	CM,
	/**
	 * Endpoint records exchanged over a TCP connection to listen or connect (the format
	 * of ibv_rc_pingpong), which stays open as the liveness channel unless
	 * out-of-band.liveness is none; the RDMA device is that of the connection's queues.
	 */
	OUT_OF_BAND

}
