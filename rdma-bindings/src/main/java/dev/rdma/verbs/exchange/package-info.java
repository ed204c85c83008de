/**
 * Out-of-band connection set-up without a connection manager: the endpoint records of an
 * RC ({@link dev.rdma.verbs.exchange.Endpoint}) or UD
 * ({@link dev.rdma.verbs.exchange.DatagramEndpoint}) queue pair, their wire format
 * ({@link dev.rdma.verbs.exchange.PingpongWire}, the one of rdma-core's
 * {@code ibv_rc_pingpong}), and their exchange over one TCP connection that then moves
 * the queue pair to RTR and RTS with the peer's values
 * ({@link dev.rdma.verbs.exchange.OutOfBand},
 * {@link dev.rdma.verbs.exchange.ExchangeListener}). For providers without rdma_cm (EFA)
 * and for talking to existing programs. Every type is non-null unless marked
 * {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs.exchange;

import org.jspecify.annotations.NullMarked;
