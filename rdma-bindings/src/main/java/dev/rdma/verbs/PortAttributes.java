package dev.rdma.verbs;

/**
 * A port's state of {@code ibv_query_port} ({@code struct ibv_port_attr}).
 *
 * @param state logical port state
 * @param maxMtu largest MTU the port supports, in bytes (256 ... 4096)
 * @param activeMtu MTU in use, in bytes
 * @param linkLayer InfiniBand or Ethernet (RoCE)
 */
public record PortAttributes(PortState state, int maxMtu, int activeMtu, int gidTableLength, int lid,
		LinkLayer linkLayer, int activeWidth, int activeSpeed, int physState, int portCapFlags) {

	/** {@code enum ibv_port_state}. */
	public enum PortState {

		NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, UNKNOWN;

		static PortState of(int code) {
			return code >= 0 && code < UNKNOWN.ordinal() ? values()[code] : UNKNOWN;
		}

	}

	/** {@code IBV_LINK_LAYER_*}. */
	public enum LinkLayer {

		UNSPECIFIED, INFINIBAND, ETHERNET, UNKNOWN;

		static LinkLayer of(int code) {
			return code >= 0 && code < UNKNOWN.ordinal() ? values()[code] : UNKNOWN;
		}

	}

	/** {@code enum ibv_mtu} (1 = 256 ... 5 = 4096) to bytes. */
	static int mtuBytes(int code) {
		return code >= 1 && code <= 5 ? 128 << code : 0;
	}
}
