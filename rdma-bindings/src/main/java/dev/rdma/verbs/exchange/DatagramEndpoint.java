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
	 * The address handle attributes that reach this endpoint from local port
	 * {@code port}: global from the local GID at {@code sgidIndex} when this endpoint's
	 * GID has a non-zero interface id (as {@code ibv_rc_pingpong} decides), else the LID.
	 */
	public AddressHandle.Attributes addressFrom(int port, int sgidIndex) {
		return gid.interfaceId() != 0 ? AddressHandle.Attributes.global(port, gid, sgidIndex)
				: AddressHandle.Attributes.local(port, lid);
	}

}
