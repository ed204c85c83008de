package dev.rdma.verbs.cm;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Rdmacm;

/**
 * {@code enum rdma_cm_event_type}: what a {@link CmEvent} reports. The constants are in
 * the C enum's order, so {@link #code()} is the ordinal.
 */
public enum CmEventType {

	/** {@code RDMA_CM_EVENT_ADDR_RESOLVED}: rdma_resolve_addr succeeded. */
	ADDR_RESOLVED,
	/** {@code RDMA_CM_EVENT_ADDR_ERROR}: rdma_resolve_addr failed (status: -errno). */
	ADDR_ERROR,
	/** {@code RDMA_CM_EVENT_ROUTE_RESOLVED}: rdma_resolve_route succeeded. */
	ROUTE_RESOLVED,
	/** {@code RDMA_CM_EVENT_ROUTE_ERROR}: rdma_resolve_route failed (status: -errno). */
	ROUTE_ERROR,
	/** {@code RDMA_CM_EVENT_CONNECT_REQUEST}: a listener received a request. */
	CONNECT_REQUEST,
	/**
	 * {@code RDMA_CM_EVENT_CONNECT_RESPONSE}: the passive side accepted (the active side
	 * then moves its QP to RTR/RTS and calls rdma_establish).
	 */
	CONNECT_RESPONSE,
	/** {@code RDMA_CM_EVENT_CONNECT_ERROR}: establishing the connection failed. */
	CONNECT_ERROR,
	/**
	 * {@code RDMA_CM_EVENT_UNREACHABLE}: the remote side did not answer (status: -errno).
	 */
	UNREACHABLE,
	/**
	 * {@code RDMA_CM_EVENT_REJECTED}: the remote side rejected (status: IB CM reason).
	 */
	REJECTED,
	/** {@code RDMA_CM_EVENT_ESTABLISHED}: the connection is up (passive side). */
	ESTABLISHED,
	/** {@code RDMA_CM_EVENT_DISCONNECTED}: the connection is down. */
	DISCONNECTED,
	/** {@code RDMA_CM_EVENT_DEVICE_REMOVAL}: the RDMA device under the id went away. */
	DEVICE_REMOVAL,
	/** {@code RDMA_CM_EVENT_MULTICAST_JOIN} (not used by this binding). */
	MULTICAST_JOIN,
	/** {@code RDMA_CM_EVENT_MULTICAST_ERROR} (not used by this binding). */
	MULTICAST_ERROR,
	/** {@code RDMA_CM_EVENT_ADDR_CHANGE}: the address's netdev changed. */
	ADDR_CHANGE,
	/** {@code RDMA_CM_EVENT_TIMEWAIT_EXIT}: the QP left time-wait after a disconnect. */
	TIMEWAIT_EXIT,
	/** A code this binding does not know (a newer librdmacm). */
	UNKNOWN;

	private static final CmEventType[] VALUES = values();

	/** The C enum's value. */
	public int code() {
		return ordinal();
	}

	/** The constant of a C value, {@link #UNKNOWN} for one outside the enum. */
	public static CmEventType of(int code) {
		return code >= 0 && code < UNKNOWN.ordinal() ? VALUES[code] : UNKNOWN;
	}

	/** True for the events that end a connection attempt in failure. */
	public boolean isError() {
		return switch (this) {
			case ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED, DEVICE_REMOVAL, MULTICAST_ERROR -> true;
			default -> false;
		};
	}

	/**
	 * {@code rdma_event_str(code)} when librdmacm is loaded, else
	 * {@code RDMA_CM_EVENT_<name>}.
	 */
	public static String text(int code) {
		if (Rdmacm.EVENT_STR != null) {
			try {
				String s = Native.string((java.lang.foreign.MemorySegment) Rdmacm.EVENT_STR.invokeExact(code));
				if (s != null) {
					return s;
				}
			}
			catch (Throwable t) {
				throw Native.unchecked(t);
			}
		}
		CmEventType t = of(code);
		return t == UNKNOWN ? "UNKNOWN EVENT (" + code + ")" : "RDMA_CM_EVENT_" + t.name();
	}

}
