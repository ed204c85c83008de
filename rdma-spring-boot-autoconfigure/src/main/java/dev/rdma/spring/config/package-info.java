/**
 * Listener endpoints and what makes them run: the
 * {@link dev.rdma.spring.config.RdmaListenerEndpointRegistry registry} (a
 * {@code SmartLifecycle}) asks a
 * {@link dev.rdma.spring.config.RdmaListenerContainerFactory container factory} for the
 * container of each endpoint;
 * {@link dev.rdma.spring.config.RdmaListenerContainerCustomizer customizers} change a
 * container before it starts.
 */
@NullMarked
package dev.rdma.spring.config;

import org.jspecify.annotations.NullMarked;
