package dev.rdma.verbs;

import java.util.Objects;

/**
 * One entry of a port's GID table with its type ({@code struct ibv_gid_entry} of
 * {@code ibv_query_gid_ex}, read by {@link Context#queryGidEntry(int, int)}). Immutable.
 *
 * @param gid {@code gid}
 * @param index {@code gid_index}
 * @param port {@code port_num}
 * @param type {@code gid_type}
 * @param netdevIfindex {@code ndev_ifindex}: the interface index of the netdev the GID
 * belongs to (0 on InfiniBand)
 */
public record GidEntry(Gid gid, int index, int port, Type type, int netdevIfindex) {

	/** {@code enum ibv_gid_type}. */
	public enum Type {

		/** {@code IBV_GID_TYPE_IB}. */
		IB,
		/** {@code IBV_GID_TYPE_ROCE_V1}: RoCE over Ethernet frames. */
		ROCE_V1,
		/** {@code IBV_GID_TYPE_ROCE_V2}: RoCE over UDP/IP. */
		ROCE_V2,
		/** A value this binding does not know. */
		UNKNOWN;

		static Type of(int code) {
			return code >= 0 && code < UNKNOWN.ordinal() ? values()[code] : UNKNOWN;
		}

	}

	public GidEntry {
		Objects.requireNonNull(gid, "gid");
		Objects.requireNonNull(type, "type");
	}

	/**
	 * A RoCE v2 GID of an IPv4 address ({@code ::ffff:a.b.c.d}): what a RoCE v2
	 * connection over IPv4 routes with.
	 */
	public boolean isIpv4RoceV2() {
		return type == Type.ROCE_V2 && gid.isIpv4Mapped();
	}

}
