/**
 * The lifecycle of {@code rdma.connections} as Spring {@code ApplicationEvent}s, as
 * spring-kafka publishes its container events: a peer established
 * ({@link dev.rdma.spring.connection.event.RdmaConnectionEstablishedEvent}) or ended
 * ({@link dev.rdma.spring.connection.event.RdmaConnectionEndedEvent}), a client's failed
 * attempt ({@link dev.rdma.spring.connection.event.RdmaConnectionAttemptFailedEvent}) and
 * its giving up ({@link dev.rdma.spring.connection.event.RdmaConnectionGaveUpEvent}), a
 * server's refused peer ({@link dev.rdma.spring.connection.event.RdmaPeerRefusedEvent}).
 * Receive them with {@code @EventListener} methods. Each is published by the connection's
 * own thread ({@code rdma-connect-<name>} or {@code rdma-accept-<name>}), never by a
 * poller thread, and only on a change of the connection: never per message.
 */
@NullMarked
package dev.rdma.spring.connection.event;

import org.jspecify.annotations.NullMarked;
