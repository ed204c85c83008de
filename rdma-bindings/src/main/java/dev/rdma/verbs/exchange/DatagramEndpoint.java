package dev.rdma.verbs.exchange;

import java.util.Objects;

import dev.rdma.verbs.AddressHandle;
import dev.rdma.verbs.Gid;

/**
 * What a peer needs to send datagrams to this UD queue pair: the address of its port and
 * the QP number and Q_Key that each send names. Immutable; sent as
 * {@value PingpongWire#DATAGRAM_MESSAGE_BYTES} bytes by
 * {@link PingpongWire#encode(DatagramEndpoint)}.
 *
 * @param lid the port's LID (0 on RoCE), 16 bits
 * @param qpn the UD queue pair number, 24 bits
 * @param qkey the Q_Key the queue pair accepts (its {@code activate} value), 32 bits
 * @param gid the port's GID; all zero ({@link Endpoint#NO_GID}) when addressed by LID
 * only
 */
public record DatagramEndpoint(int lid, int qpn, int qkey, Gid gid) {

	public DatagramEndpoint {
		Endpoint.requireRange("lid", lid, 0xffff);
		Endpoint.requireRange("qpn", qpn, 0xffffff);
		Objects.requireNonNull(gid, "gid");
	}

	/**
	 * {@code grh.hop_limit} of the address handles {@link #addressFrom} makes: 64, as
	 * rdma-core's {@code ibv_ud_pingpong} sets it ({@code ibv_rc_pingpong} uses 1 for its
	 * RC path, {@link dev.rdma.verbs.QueuePair.ConnectionParameters#hopLimit()}).
	 */
	public static final int HOP_LIMIT = 64;

	/**
	 * The {@code struct ibv_ah_attr} (for {@code ibv_create_ah}) that reaches this
	 * endpoint from local port {@code port}, as rdma-core's {@code ibv_ud_pingpong}
	 * builds it in {@code pp_connect_ctx}: {@code dlid} is always this endpoint's
	 * {@link #lid()} (InfiniBand routes by it even with a GRH; it is 0 on RoCE), and when
	 * this endpoint's GID has a non-zero interface id the address is also global: a GRH
	 * to that GID from the local GID at {@code sgidIndex}, with hop limit
	 * {@value #HOP_LIMIT}. A GID with a zero interface id gives a LID-only address, which
	 * works on InfiniBand only (RoCE needs the GID).
	 * @param port the local port number, 1..255
	 * @param sgidIndex the local GID index ({@code grh.sgid_index}), 0..255; unused for a
	 * LID-only address
	 */
	public AddressHandle.Attributes addressFrom(int port, int sgidIndex) {
		return gid.interfaceId() != 0
				? AddressHandle.Attributes.global(port, gid, sgidIndex).withDlid(lid).withHopLimit(HOP_LIMIT)
				: AddressHandle.Attributes.local(port, lid);
	}

}
