package dev.rdma.spring.config;

import dev.rdma.spring.listener.CompletionQueueListenerContainer;

/**
 * Makes the container of a listener endpoint: the {@link RdmaListenerEndpointRegistry}
 * asks it once per listener. The starter's auto-configuration defines one,
 * {@value #DEFAULT_BEAN_NAME}, a {@link DefaultRdmaListenerContainerFactory} filled from
 * the {@code rdma.*} properties; an application may define its own under that name.
 */
@FunctionalInterface
public interface RdmaListenerContainerFactory {

	/** Bean name of the factory the listener annotation post-processor uses. */
	String DEFAULT_BEAN_NAME = "rdmaListenerContainerFactory";

	/**
	 * A container, not yet started, for {@code endpoint}.
	 * @throws dev.rdma.spring.RdmaConfigurationException naming the listener when what it
	 * refers to (its queue, its error handler) does not exist
	 */
	CompletionQueueListenerContainer createListenerContainer(RdmaListenerEndpoint endpoint);

}
