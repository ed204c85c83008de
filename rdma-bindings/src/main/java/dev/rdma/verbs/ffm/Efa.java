package dev.rdma.verbs.ffm;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/** Downcall handles of libefa.so.1. A missing libefa only disables EFA CQs. */
public final class Efa {

	private Efa() {
	}

	public static final String SONAME = "libefa.so.1";

	private static final Throwable[] FAILURE = new Throwable[1];

	public static final Optional<SymbolLookup> LIB = Native.library(SONAME, FAILURE);

	public static final Throwable LOAD_FAILURE = FAILURE[0];

	public static final MethodHandle CREATE_CQ = Native.symbol(LIB, "efadv_create_cq",
			FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, ADDRESS, JAVA_INT), Native.CAPTURE_ERRNO);

	public static final MethodHandle CQ_FROM_IBV_CQ_EX = Native.symbol(LIB, "efadv_cq_from_ibv_cq_ex", Native.PTR_PTR);

	/**
	 * rdma-core 59 added {@code efadv_query_cq}: its presence dates the installed
	 * rdma-core.
	 */
	public static final boolean RDMA_CORE_59_OR_NEWER = LIB.flatMap(l -> l.find("efadv_query_cq")).isPresent();

	/** {@code int (*wc_read_sgid)(struct efadv_cq *, union ibv_gid *)} */
	public static final MethodHandle FP_WC_READ_SGID = Native.pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS),
			Native.CRITICAL);

	/** {@code bool (*wc_is_unsolicited)(struct efadv_cq *)} (rdma-core 52+) */
	public static final MethodHandle FP_WC_IS_UNSOLICITED = Native.pointer(FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS),
			Native.CRITICAL);

	public static boolean available() {
		return CREATE_CQ != null && CQ_FROM_IBV_CQ_EX != null;
	}

}
