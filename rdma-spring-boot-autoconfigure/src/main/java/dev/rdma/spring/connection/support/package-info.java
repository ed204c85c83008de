/**
 * The plumbing behind {@code rdma.connections}: one
 * {@link dev.rdma.spring.connection.support.PeerConnection} per connected queue pair (its
 * registered send and receive buffers), the
 * {@link dev.rdma.spring.connection.support.ClientConnection} and
 * {@link dev.rdma.spring.connection.support.ServerConnection} that drive rdma_cm (and
 * {@link dev.rdma.spring.connection.support.OutOfBandClientConnection} and
 * {@link dev.rdma.spring.connection.support.OutOfBandServerConnection}, which connect
 * over an out-of-band TCP exchange instead), the
 * {@link dev.rdma.spring.connection.support.CompletionRouter} that hands each completion
 * of a shared completion queue to its queue pair, and the
 * {@link dev.rdma.spring.connection.support.RdmaConnectionRegistry} that starts them
 * after the pollers and stops them before.
 */
@NullMarked
package dev.rdma.spring.connection.support;

import org.jspecify.annotations.NullMarked;
