package dev.rdma.verbs.cm;

/**
 * The parts of {@code struct rdma_conn_param} that are not the private data or the QP:
 * RDMA read/atomic depths and the retry counts the connection manager puts into the QP
 * attributes it computes ({@code rdma_init_qp_attr}). Immutable.
 *
 * @param responderResources {@code responder_resources}: RDMA reads/atomics this side
 * accepts in flight, 0..254, or {@link #DEVICE_MAXIMUM} for the device's maximum
 * @param initiatorDepth {@code initiator_depth}: RDMA reads/atomics this side has in
 * flight, 0..254, or {@link #DEVICE_MAXIMUM}
 * @param retryCount {@code retry_count}: transport retries, 0..7 (ignored when accepting)
 * @param rnrRetryCount {@code rnr_retry_count}: RNR retries, 0..7 (7 = infinite)
 */
public record CmParameters(int responderResources, int initiatorDepth, int retryCount, int rnrRetryCount) {

	/** {@code RDMA_MAX_RESP_RES} / {@code RDMA_MAX_INIT_DEPTH}: the device's maximum. */
	public static final int DEVICE_MAXIMUM = 0xFF;

	/**
	 * The device's maximum read depths, 7 retries and 7 RNR retries (rping,
	 * rdma_client/rdma_server).
	 */
	public static final CmParameters DEFAULTS = new CmParameters(DEVICE_MAXIMUM, DEVICE_MAXIMUM, 7, 7);

	public CmParameters {
		check("responderResources (responder_resources)", responderResources, 0, 255);
		check("initiatorDepth (initiator_depth)", initiatorDepth, 0, 255);
		check("retryCount (retry_count)", retryCount, 0, 7);
		check("rnrRetryCount (rnr_retry_count)", rnrRetryCount, 0, 7);
	}

	private static void check(String name, int value, int min, int max) {
		if (value < min || value > max) {
			throw new IllegalArgumentException(name + " must be " + min + ".." + max + ", got " + value);
		}
	}

}
