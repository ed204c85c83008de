package dev.rdma.verbs.exchange;

import java.util.Objects;

import dev.rdma.verbs.Gid;
import dev.rdma.verbs.QueuePair;

/**
 * What a peer needs to connect its RC queue pair to this one (rdma-core's
 * {@code struct pingpong_dest} plus the path MTU). Immutable; sent as 52 bytes by
 * {@link PingpongWire#encode(Endpoint)}, which carries no MTU.
 *
 * @param lid the port's LID ({@code ibv_port_attr.lid}; 0 on RoCE), 16 bits
 * @param qpn the queue pair number, 24 bits
 * @param psn the first packet sequence number the queue pair sends ({@code sq_psn}), 24
 * bits
 * @param gid the GID the queue pair sends from; all zero when addressed by LID only
 * (InfiniBand without {@code -g})
 * @param mtu in a local record ({@link OutOfBand#localEndpoint}), the path MTU in bytes
 * this side connects with; in a peer's record {@link #UNKNOWN_MTU}, as the wire format
 * carries no MTU (so {@link OutOfBand} never learns the peer's: configure both sides
 * alike)
 */
public record Endpoint(int lid, int qpn, int psn, Gid gid, int mtu) {

	/** {@link #mtu()} of a record that does not say. */
	public static final int UNKNOWN_MTU = 0;

	/** The GID of an endpoint addressed by LID only. */
	public static final Gid NO_GID = new Gid(new byte[16]);

	public Endpoint {
		requireRange("lid", lid, 0xffff);
		requireRange("qpn", qpn, 0xffffff);
		requireRange("psn", psn, QueuePair.ConnectionParameters.MAX_PSN);
		Objects.requireNonNull(gid, "gid");
		if (mtu != UNKNOWN_MTU && (mtu < 256 || mtu > 4096 || Integer.bitCount(mtu) != 1)) {
			throw new IllegalArgumentException("mtu must be 256, 512, 1024, 2048 or 4096 (or 0: unknown), got " + mtu);
		}
	}

	static void requireRange(String name, long value, long max) {
		if (value < 0 || value > max) {
			throw new IllegalArgumentException(name + " must be 0.." + max + ", got " + value);
		}
	}

}
