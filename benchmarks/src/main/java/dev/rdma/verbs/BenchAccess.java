package dev.rdma.verbs;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Benchmarks only (the diagnosis cases of docs/benchmarks.md, "Where the time goes"): what the binding's poll path
 * calls, without the binding around it, so that a run can split the Java/C gap into the FFM downcall itself and the
 * binding's own work. Never used by the binding or the starter.
 */
public final class BenchAccess {

    /** The binding's own handle for {@code cq->context->ops.poll_cq} (critical, pointer arguments as longs). */
    public static final MethodHandle POLL_CQ = Ibverbs.FP_POLL_CQ;
    public static final long WC_SIZE = Layouts.WC_SIZE;
    public static final long WC_WR_ID = Layouts.WC_WR_ID;
    public static final long WC_STATUS = Layouts.WC_STATUS;
    /** The binding's handles for the extended CQ's start_poll, end_poll and int readers. */
    public static final MethodHandle START_POLL = Ibverbs.FP_START_POLL;
    public static final MethodHandle END_POLL = Ibverbs.FP_END_POLL;
    public static final MethodHandle INT_OF_CQ = Ibverbs.FP_INT_OF_CQ;
    public static final long CQ_EX_WR_ID = Layouts.CQ_EX_WR_ID;
    public static final long CQ_EX_STATUS = Layouts.CQ_EX_STATUS;

    private BenchAccess() {
    }

    /** {@code cq->context->ops.poll_cq}, the provider function {@code ibv_poll_cq} calls. */
    public static MemorySegment pollFn(CompletionQueue cq) {
        return cq.context.handle.get(ADDRESS, Layouts.CONTEXT_POLL_CQ);
    }

    /** The {@code struct ibv_cq *} of {@code cq}. */
    public static long cqAddress(CompletionQueue cq) {
        return cq.cq;
    }

    /** A function pointer of the {@code struct ibv_cq_ex} of {@code cq}, e.g. {@code "start_poll"}. */
    public static MemorySegment exFn(ExtendedCompletionQueue cq, String field) {
        return cq.handle.get(ADDRESS, Layouts.off(Layouts.IBV_CQ_EX, field));
    }

    /** The {@code struct ibv_cq_ex} of {@code cq}, as the binding reads wr_id and status from it. */
    public static MemorySegment exHandle(ExtendedCompletionQueue cq) {
        return cq.handle;
    }

    /** The {@code struct ibv_wc} array of {@code buffer}. */
    public static long wcs(WorkCompletionBuffer buffer) {
        return buffer.wcsAddress;
    }
}
