package dev.rdma.verbs.ffm;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import org.jspecify.annotations.Nullable;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static dev.rdma.verbs.ffm.Native.CAPTURE_ERRNO;

/**
 * Downcall handles of librdmacm.so.1 (Debian package {@code librdmacm1}). Loaded on its
 * own: a missing librdmacm leaves every handle null and only the connection manager
 * ({@code dev.rdma.verbs.cm}) unavailable; libibverbs and everything built on it keep
 * working. Every call that reports failure as -1 + errno captures errno in the same
 * downcall. None is critical: each one writes to the rdma_cm fd (a system call), and
 * {@code rdma_destroy_id} may wait on a condition variable.
 */
public final class Rdmacm {

	private Rdmacm() {
	}

	/**
	 * {@code librdmacm.so.1}; the system property {@code dev.rdma.verbs.rdmacm.library}
	 * names another file, which the host tests use to prove how the binding behaves
	 * without librdmacm.
	 */
	public static final String SONAME = System.getProperty("dev.rdma.verbs.rdmacm.library", "librdmacm.so.1");

	/** The Debian/Ubuntu package that provides {@link #SONAME}. */
	public static final String PACKAGE = "librdmacm1";

	private static final Throwable[] FAILURE = new Throwable[1];

	public static final Optional<SymbolLookup> LIB = Native.library(SONAME, FAILURE);

	public static final @Nullable Throwable LOAD_FAILURE = FAILURE[0];

	private static @Nullable MethodHandle fn(String name, FunctionDescriptor fd, java.lang.foreign.Linker.Option... o) {
		return Native.symbol(LIB, name, fd, o);
	}

	private static final FunctionDescriptor INT_PTR_PTR = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);

	private static final FunctionDescriptor INT_PTR_INT = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT);

	/**
	 * {@code struct rdma_event_channel *rdma_create_event_channel(void)}: NULL + errno
	 */
	public static final @Nullable MethodHandle CREATE_EVENT_CHANNEL = fn("rdma_create_event_channel",
			FunctionDescriptor.of(ADDRESS), CAPTURE_ERRNO);

	/** {@code void rdma_destroy_event_channel(struct rdma_event_channel *)} */
	public static final @Nullable MethodHandle DESTROY_EVENT_CHANNEL = fn("rdma_destroy_event_channel",
			Native.VOID_PTR);

	/**
	 * {@code int rdma_create_id(struct rdma_event_channel *, struct rdma_cm_id **, void *context, enum rdma_port_space)}
	 */
	public static final @Nullable MethodHandle CREATE_ID = fn("rdma_create_id",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT), CAPTURE_ERRNO);

	/**
	 * {@code int rdma_destroy_id(struct rdma_cm_id *)}: waits until its events are acked
	 */
	public static final @Nullable MethodHandle DESTROY_ID = fn("rdma_destroy_id", Native.INT_PTR, CAPTURE_ERRNO);

	/** {@code int rdma_bind_addr(struct rdma_cm_id *, struct sockaddr *)} */
	public static final @Nullable MethodHandle BIND_ADDR = fn("rdma_bind_addr", INT_PTR_PTR, CAPTURE_ERRNO);

	/**
	 * {@code int rdma_resolve_addr(struct rdma_cm_id *, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)}
	 */
	public static final @Nullable MethodHandle RESOLVE_ADDR = fn("rdma_resolve_addr",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT), CAPTURE_ERRNO);

	/** {@code int rdma_resolve_route(struct rdma_cm_id *, int timeout_ms)} */
	public static final @Nullable MethodHandle RESOLVE_ROUTE = fn("rdma_resolve_route", INT_PTR_INT, CAPTURE_ERRNO);

	/** {@code int rdma_connect(struct rdma_cm_id *, struct rdma_conn_param *)} */
	public static final @Nullable MethodHandle CONNECT = fn("rdma_connect", INT_PTR_PTR, CAPTURE_ERRNO);

	/** {@code int rdma_listen(struct rdma_cm_id *, int backlog)} */
	public static final @Nullable MethodHandle LISTEN = fn("rdma_listen", INT_PTR_INT, CAPTURE_ERRNO);

	/** {@code int rdma_accept(struct rdma_cm_id *, struct rdma_conn_param *)} */
	public static final @Nullable MethodHandle ACCEPT = fn("rdma_accept", INT_PTR_PTR, CAPTURE_ERRNO);

	/** {@code int rdma_reject(struct rdma_cm_id *, const void *, uint8_t)} */
	public static final @Nullable MethodHandle REJECT = fn("rdma_reject",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_BYTE), CAPTURE_ERRNO);

	/** {@code int rdma_disconnect(struct rdma_cm_id *)} */
	public static final @Nullable MethodHandle DISCONNECT = fn("rdma_disconnect", Native.INT_PTR, CAPTURE_ERRNO);

	/** {@code int rdma_establish(struct rdma_cm_id *)} (RDMACM_1.2) */
	public static final @Nullable MethodHandle ESTABLISH = fn("rdma_establish", Native.INT_PTR, CAPTURE_ERRNO);

	/**
	 * {@code int rdma_get_cm_event(struct rdma_event_channel *, struct rdma_cm_event **)}:
	 * -1 + EAGAIN on a non-blocking channel without an event
	 */
	public static final @Nullable MethodHandle GET_CM_EVENT = fn("rdma_get_cm_event", INT_PTR_PTR, CAPTURE_ERRNO);

	/** {@code int rdma_ack_cm_event(struct rdma_cm_event *)} */
	public static final @Nullable MethodHandle ACK_CM_EVENT = fn("rdma_ack_cm_event", Native.INT_PTR, CAPTURE_ERRNO);

	/** {@code const char *rdma_event_str(enum rdma_cm_event_type)} */
	public static final @Nullable MethodHandle EVENT_STR = fn("rdma_event_str",
			FunctionDescriptor.of(ADDRESS, JAVA_INT));

	/**
	 * {@code int rdma_init_qp_attr(struct rdma_cm_id *, struct ibv_qp_attr *, int *mask)}
	 * (RDMACM_1.2)
	 */
	public static final @Nullable MethodHandle INIT_QP_ATTR = fn("rdma_init_qp_attr",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), CAPTURE_ERRNO);

	/** True when librdmacm.so.1 and every symbol this binding calls were found. */
	public static boolean available() {
		return CREATE_EVENT_CHANNEL != null && DESTROY_EVENT_CHANNEL != null && CREATE_ID != null && DESTROY_ID != null
				&& BIND_ADDR != null && RESOLVE_ADDR != null && RESOLVE_ROUTE != null && CONNECT != null
				&& LISTEN != null && ACCEPT != null && REJECT != null && DISCONNECT != null && ESTABLISH != null
				&& GET_CM_EVENT != null && ACK_CM_EVENT != null && EVENT_STR != null && INIT_QP_ATTR != null;
	}

	/** Why librdmacm is unavailable (naming the package to install), or null. */
	public static @Nullable String unavailableReason() {
		if (available()) {
			return null;
		}
		if (Native.UNSUPPORTED_ARCH != null) {
			return Native.UNSUPPORTED_ARCH;
		}
		return "cannot load " + SONAME + " (the RDMA connection manager, rdma-core): install the package " + PACKAGE
				+ " (apt-get install " + PACKAGE + ")"
				+ (LOAD_FAILURE == null ? "; a symbol this binding needs is missing (rdma-core older than 31?)"
						: "; " + LOAD_FAILURE.getMessage());
	}

}
