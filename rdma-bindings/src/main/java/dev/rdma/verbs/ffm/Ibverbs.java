package dev.rdma.verbs.ffm;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static dev.rdma.verbs.ffm.Native.CAPTURE_ERRNO;
import static dev.rdma.verbs.ffm.Native.CRITICAL;

/**
 * Downcall handles of libibverbs.so.1 (exported symbols, default version) and of the
 * function pointers behind the static inline verbs of {@code verbs.h}. When the library
 * is missing every exported handle is null and {@code Rdma.requireLibrary()} throws; no
 * object of this binding exists then, so no null handle is ever called.
 */
public final class Ibverbs {

	private Ibverbs() {
	}

	public static final String SONAME = "libibverbs.so.1";

	private static final Throwable[] FAILURE = new Throwable[1];

	public static final Optional<SymbolLookup> LIB = Native.library(SONAME, FAILURE);

	public static final Throwable LOAD_FAILURE = FAILURE[0];

	private static MethodHandle fn(String name, FunctionDescriptor fd, java.lang.foreign.Linker.Option... options) {
		return Native.symbol(LIB, name, fd, options);
	}

	// devices and contexts
	public static final MethodHandle GET_DEVICE_LIST = fn("ibv_get_device_list", Native.PTR_PTR, CAPTURE_ERRNO);

	public static final MethodHandle FREE_DEVICE_LIST = fn("ibv_free_device_list", Native.VOID_PTR);

	public static final MethodHandle GET_DEVICE_NAME = fn("ibv_get_device_name", Native.PTR_PTR);

	public static final MethodHandle GET_DEVICE_GUID = fn("ibv_get_device_guid",
			FunctionDescriptor.of(JAVA_LONG, ADDRESS));

	public static final MethodHandle OPEN_DEVICE = fn("ibv_open_device", Native.PTR_PTR, CAPTURE_ERRNO);

	public static final MethodHandle CLOSE_DEVICE = fn("ibv_close_device", Native.INT_PTR, CAPTURE_ERRNO);

	public static final MethodHandle QUERY_DEVICE = fn("ibv_query_device",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));

	public static final MethodHandle QUERY_PORT_COMPAT = fn("ibv_query_port",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS));

	public static final MethodHandle QUERY_GID = fn("ibv_query_gid",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS), CAPTURE_ERRNO);

	/**
	 * {@code _ibv_query_gid_ex(ctx, port, index, entry, flags, entry_size)}, the exported
	 * body of the inline {@code ibv_query_gid_ex} (IBVERBS_1.11): 0 or an errno value.
	 */
	public static final MethodHandle QUERY_GID_EX = fn("_ibv_query_gid_ex",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), CAPTURE_ERRNO);

	public static final MethodHandle GET_ASYNC_EVENT = fn("ibv_get_async_event",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), CAPTURE_ERRNO);

	public static final MethodHandle ACK_ASYNC_EVENT = fn("ibv_ack_async_event", Native.VOID_PTR);

	public static final MethodHandle EVENT_TYPE_STR = fn("ibv_event_type_str",
			FunctionDescriptor.of(ADDRESS, JAVA_INT));

	public static final MethodHandle WC_STATUS_STR = fn("ibv_wc_status_str", FunctionDescriptor.of(ADDRESS, JAVA_INT));

	// completion channels and CQs
	public static final MethodHandle CREATE_COMP_CHANNEL = fn("ibv_create_comp_channel", Native.PTR_PTR, CAPTURE_ERRNO);

	public static final MethodHandle DESTROY_COMP_CHANNEL = fn("ibv_destroy_comp_channel", Native.INT_PTR);

	public static final MethodHandle CREATE_CQ = fn("ibv_create_cq",
			FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT), CAPTURE_ERRNO);

	public static final MethodHandle RESIZE_CQ = fn("ibv_resize_cq",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));

	public static final MethodHandle DESTROY_CQ = fn("ibv_destroy_cq", Native.INT_PTR);

	/**
	 * The address of {@code ibv_destroy_cq} (NULL without the library): what a CQ's
	 * destroy calls through FP_DESTROY.
	 */
	public static final MemorySegment DESTROY_CQ_FUNCTION = LIB.flatMap(l -> l.find("ibv_destroy_cq"))
		.orElse(MemorySegment.NULL);

	/**
	 * {@code int (*destroy)(void *)} through a function pointer; not critical (a system
	 * call).
	 */
	public static final MethodHandle FP_DESTROY = Native.pointer(Native.INT_PTR);

	public static final MethodHandle GET_CQ_EVENT = fn("ibv_get_cq_event",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), CAPTURE_ERRNO);

	/**
	 * The same without errno capture (no allocation per call): the common path, see
	 * CompletionChannel.getEvent.
	 */
	public static final MethodHandle GET_CQ_EVENT_NO_ERRNO = fn("ibv_get_cq_event",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));

	public static final MethodHandle ACK_CQ_EVENTS = fn("ibv_ack_cq_events",
			FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));

	// PD, MR, QP
	public static final MethodHandle ALLOC_PD = fn("ibv_alloc_pd", Native.PTR_PTR, CAPTURE_ERRNO);

	public static final MethodHandle DEALLOC_PD = fn("ibv_dealloc_pd", Native.INT_PTR);

	public static final MethodHandle REG_MR = fn("ibv_reg_mr",
			FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT), CAPTURE_ERRNO);

	public static final MethodHandle DEREG_MR = fn("ibv_dereg_mr", Native.INT_PTR);

	public static final MethodHandle CREATE_QP = fn("ibv_create_qp", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS),
			CAPTURE_ERRNO);

	public static final MethodHandle MODIFY_QP = fn("ibv_modify_qp",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));

	public static final MethodHandle DESTROY_QP = fn("ibv_destroy_qp", Native.INT_PTR);

	/**
	 * {@code ibv_query_qp(qp, attr, attr_mask, init_attr)}: 0 or an errno value.
	 */
	public static final MethodHandle QUERY_QP = fn("ibv_query_qp",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS));

	// shared receive queues (exported, IBVERBS_1.1)
	/** {@code ibv_create_srq(pd, srq_init_attr)}: NULL + errno. */
	public static final MethodHandle CREATE_SRQ = fn("ibv_create_srq", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS),
			CAPTURE_ERRNO);

	/** {@code ibv_modify_srq(srq, srq_attr, srq_attr_mask)}: 0 or an errno value. */
	public static final MethodHandle MODIFY_SRQ = fn("ibv_modify_srq",
			FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));

	/** {@code ibv_query_srq(srq, srq_attr)}: 0 or an errno value. */
	public static final MethodHandle QUERY_SRQ = fn("ibv_query_srq", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));

	/** {@code ibv_destroy_srq(srq)}: 0 or an errno value (EBUSY while a QP uses it). */
	public static final MethodHandle DESTROY_SRQ = fn("ibv_destroy_srq", Native.INT_PTR);

	public static final MethodHandle CREATE_AH = fn("ibv_create_ah", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS),
			CAPTURE_ERRNO);

	public static final MethodHandle DESTROY_AH = fn("ibv_destroy_ah", Native.INT_PTR);

	// function pointers behind static inline verbs (target address first)
	//
	// Linker.Option.critical (no thread-state transition: the calling thread stays "in
	// Java", so a safepoint waits for
	// the call to return) is used only for provider functions that never block, sleep,
	// make a system call or wait for
	// a lock that Java code may hold. The CQ functions below take the provider's CQ
	// spinlock, which the extended
	// iterator holds across Java code; every one of them runs in the CQ's exclusive slot
	// (CompletionQueue.poller), so
	// none of them ever finds that lock taken by this binding.
	// On the poll path, pointer arguments are passed as JAVA_LONG (the same INTEGER class
	// and register in the
	// x86_64 SysV ABI, the only one this binding supports): no MemorySegment to check and
	// unbox per call.

	/** {@code int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *)} */
	public static final MethodHandle FP_POLL_CQ = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG), CRITICAL);

	/**
	 * {@code int (*req_notify_cq)(struct ibv_cq *, int)}; not critical: some providers
	 * make a system call (rxe: ibv_cmd_req_notify_cq, a write(2) to the uverbs fd).
	 */
	public static final MethodHandle FP_REQ_NOTIFY_CQ = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT));

	/**
	 * {@code struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *)}
	 */
	public static final MethodHandle FP_CREATE_CQ_EX = Native.pointer(FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS),
			CAPTURE_ERRNO);

	/**
	 * {@code struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *, struct ibv_parent_domain_init_attr *)}
	 */
	public static final MethodHandle FP_ALLOC_PARENT_DOMAIN = Native
		.pointer(FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), CAPTURE_ERRNO);

	/**
	 * {@code int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t)}
	 */
	public static final MethodHandle FP_QUERY_PORT = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS, JAVA_LONG));

	// device attributes ex
	/**
	 * {@code int (*query_device_ex)(struct ibv_context *, const struct ibv_query_device_ex_input *,
	 * struct ibv_device_attr_ex *, size_t attr_size)}: 0 or a positive errno value (no
	 * errno capture). Not critical: it makes a system call.
	 */
	public static final MethodHandle FP_QUERY_DEVICE_EX = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG));

	/**
	 * {@code int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **)},
	 * same for post_recv. Not critical: a provider may make a system call here (rxe's
	 * post_send rings the kernel through {@code ibv_cmd_post_send}) and spins on the
	 * queue's lock, neither of which is allowed under critical linkage.
	 */
	public static final MethodHandle FP_POST = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));

	/** {@code int (*start_poll)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *)} */
	public static final MethodHandle FP_START_POLL = Native
		.pointer(FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), CRITICAL);

	/**
	 * {@code int (*next_poll)(struct ibv_cq_ex *)}; also every reader returning a 32-bit
	 * value
	 */
	public static final MethodHandle FP_INT_OF_CQ = Native.pointer(FunctionDescriptor.of(JAVA_INT, JAVA_LONG),
			CRITICAL);

	/** {@code void (*end_poll)(struct ibv_cq_ex *)} */
	public static final MethodHandle FP_END_POLL = Native.pointer(FunctionDescriptor.ofVoid(JAVA_LONG), CRITICAL);

	/** readers returning uint64_t */
	public static final MethodHandle FP_LONG_OF_CQ = Native.pointer(FunctionDescriptor.of(JAVA_LONG, JAVA_LONG),
			CRITICAL);

	/** readers returning uint16_t */
	public static final MethodHandle FP_SHORT_OF_CQ = Native
		.pointer(FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_SHORT, JAVA_LONG), CRITICAL);

	/** readers returning uint8_t */
	public static final MethodHandle FP_BYTE_OF_CQ = Native.pointer(FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG),
			CRITICAL);

	/** {@code void (*read_tm_info)(struct ibv_cq_ex *, struct ibv_wc_tm_info *)} */
	public static final MethodHandle FP_READ_TM_INFO = Native.pointer(FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG),
			CRITICAL);

}
