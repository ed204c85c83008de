/**
 * Connections between applications over RDMA, declared under {@code rdma.connections}:
 * the {@link dev.rdma.spring.connection.RdmaConnection} bean to send with, the
 * {@link dev.rdma.spring.connection.RdmaMessage} a
 * {@link dev.rdma.spring.annotation.RdmaMessageListener} receives, and their states. The
 * plumbing (queue pairs, buffers, rdma_cm events) is in
 * {@code dev.rdma.spring.connection.support}.
 */
@NullMarked
package dev.rdma.spring.connection;

import org.jspecify.annotations.NullMarked;
