/**
 * The plumbing behind {@code rdma.connections}: one
 * {@link dev.rdma.spring.connection.support.PeerConnection} per connected queue pair (its
 * registered send and receive buffers), the
 * {@link dev.rdma.spring.connection.support.ClientConnection} and
 * {@link dev.rdma.spring.connection.support.ServerConnection} that connect and accept
 * them, with back-off and {@code max-peers}, through a transport (rdma_cm, or an
 * out-of-band TCP exchange for {@code exchange: out-of-band}), the
 * {@link dev.rdma.spring.connection.support.CompletionRouter} that hands each completion
 * of a shared completion queue to its queue pair, and the
 * {@link dev.rdma.spring.connection.support.RdmaConnectionRegistry} that starts them
 * after the pollers and stops them before.
 */
@NullMarked
package dev.rdma.spring.connection.support;

import org.jspecify.annotations.NullMarked;
