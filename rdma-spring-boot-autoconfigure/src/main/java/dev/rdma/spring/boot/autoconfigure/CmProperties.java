package dev.rdma.spring.boot.autoconfigure;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/**
 * rdma_cm connection parameters; the defaults are those of the bindings
 * (CmParameters.DEFAULTS).
 */
@ConfigurationPropertiesSource
public class CmProperties {

	/**
	 * RDMA reads in flight that this side accepts as responder (responder_resources),
	 * 0..255; 255 = the device's maximum.
	 */
	private int responderResources = 255;

	/**
	 * RDMA reads in flight that this side issues (initiator_depth), 0..255; 255 = the
	 * device's maximum.
	 */
	private int initiatorDepth = 255;

	/**
	 * Transport retries after a timeout (retry_count), 0..7; with out-of-band.liveness
	 * none the QP uses at most 6 (Soft-RoCE retries for ever at 7).
	 */
	private int retryCount = 7;

	/**
	 * Retries after a receiver-not-ready NAK (rnr_retry_count), 0..7; 7 = infinite.
	 */
	private int rnrRetryCount = 7;

	public int getResponderResources() {
		return responderResources;
	}

	public void setResponderResources(int responderResources) {
		this.responderResources = responderResources;
	}

	public int getInitiatorDepth() {
		return initiatorDepth;
	}

	public void setInitiatorDepth(int initiatorDepth) {
		this.initiatorDepth = initiatorDepth;
	}

	public int getRetryCount() {
		return retryCount;
	}

	public void setRetryCount(int retryCount) {
		this.retryCount = retryCount;
	}

	public int getRnrRetryCount() {
		return rnrRetryCount;
	}

	public void setRnrRetryCount(int rnrRetryCount) {
		this.rnrRetryCount = rnrRetryCount;
	}

}
