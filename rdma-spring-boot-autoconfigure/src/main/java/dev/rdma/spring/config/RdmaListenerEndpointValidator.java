package dev.rdma.spring.config;

import java.util.List;

import dev.rdma.verbs.WcExFlag;

/**
 * Checks a listener against the completion queues the application configured, while the
 * listener annotation post-processor discovers it (so that startup fails naming the
 * listener before anything starts). The starter's auto-configuration checks against the
 * {@code rdma.completion-queues} properties. Without a bean of this type ({@link #NONE})
 * a listener on an unknown queue fails when its container is made.
 *
 * <p>
 * Implementations throw {@link dev.rdma.spring.RdmaConfigurationException} naming the
 * listener.
 */
public interface RdmaListenerEndpointValidator {

	/** Checks nothing. */
	RdmaListenerEndpointValidator NONE = new RdmaListenerEndpointValidator() {
	};

	/**
	 * Checks the queue a listener names (called first, before its parameters are
	 * checked).
	 * @param listener how messages name the listener
	 * @param queue the annotation's queue, possibly blank
	 */
	default void validateQueue(String listener, String queue) {
	}

	/**
	 * Checks that the queue provides the extended fields the listener reads (called once
	 * its queue and parameters passed).
	 */
	default void validateFields(String listener, String queue, List<WcExFlag> fields) {
	}

}
