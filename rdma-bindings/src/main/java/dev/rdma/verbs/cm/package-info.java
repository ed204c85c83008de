/**
 * The RDMA connection manager (librdmacm, {@code rdma_cm}) over FFM: an
 * {@link dev.rdma.verbs.cm.EventChannel} and the {@link dev.rdma.verbs.cm.ConnectionId}s
 * created on it, which resolve addresses and routes, connect, listen, accept, reject and
 * disconnect, each step reported by a {@link dev.rdma.verbs.cm.CmEvent}. The queue pair
 * stays the application's own ({@link dev.rdma.verbs.ProtectionDomain#createQueuePair} on
 * its own CQs): the connection id only moves it through its states with the attributes
 * {@code rdma_init_qp_attr} computes. Every type is non-null unless marked
 * {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs.cm;

import org.jspecify.annotations.NullMarked;
