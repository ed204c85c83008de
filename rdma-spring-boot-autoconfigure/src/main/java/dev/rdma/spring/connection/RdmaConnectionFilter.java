package dev.rdma.spring.connection;

import java.net.InetSocketAddress;

import org.jspecify.annotations.Nullable;

/**
 * Decides whether a server connection ({@code rdma.connections.<name>.listen}) accepts a
 * peer that asks to connect, before anything is made for it (no queue pair, no buffers,
 * no region). Declare beans of this type: a server asks each of them, in their
 * {@link org.springframework.core.Ordered order} ({@code @Order}, {@code Ordered}), after
 * its {@code allowed-peers} admitted the peer's address; the first that refuses decides.
 *
 * <p>
 * A refused peer is rejected with {@code rdma_reject} whose private data reads
 * {@code rdma-spring-boot: refused: <reason>} (with {@code exchange: out-of-band}: its
 * TCP connection is closed before any record is sent), counted in
 * {@code rdma.connection.rejected} (tag {@code reason}: {@code FILTERED}), published as a
 * {@link dev.rdma.spring.connection.event.RdmaPeerRefusedEvent} with reason
 * {@code FILTERED}, and logged at a bounded rate.
 *
 * <p>
 * <b>Threading:</b> called on the server's {@code rdma-accept-<name>} thread, one request
 * at a time; while it runs, the server accepts no other peer, so it must not block for
 * long. An exception it throws refuses the peer (reason {@code FILTERED}, the exception's
 * message as the detail).
 *
 * <p>
 * Admission decides who may connect; it is not authentication (a peer's address can be
 * spoofed on a fabric you share) nor encryption (RDMA traffic is not encrypted).
 */
@FunctionalInterface
public interface RdmaConnectionFilter {

	/**
	 * Whether {@code request} may connect.
	 * @param request the connection request (valid during this call only)
	 * @return null to admit the peer, else the reason to refuse it (sent to the peer in
	 * the reject's private data, up to 96 ASCII characters; logged in full)
	 */
	@Nullable String refuse(Request request);

	/**
	 * A peer asking a server connection to accept it.
	 *
	 * @param connectionName the name of the connection ({@code rdma.connections.<name>})
	 * @param peerAddress the peer's address (rdma_cm: its RDMA address; out of band: the
	 * address of its TCP connection)
	 * @param privateData a copy of the private data of the peer's connect request
	 * (rdma_cm, at most 56 bytes, zero-padded by the transport), empty out of band
	 * @param outOfBand whether the connection's exchange is {@code out-of-band}
	 */
	record Request(String connectionName, InetSocketAddress peerAddress, byte[] privateData, boolean outOfBand) {

	}

}
