package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Benchmarks only (the diagnosis cases of docs/benchmarks.md, "Where the time goes"):
 * what the binding's poll path calls, without the binding around it, so that a run can
 * split the Java/C gap into the FFM downcall itself and the binding's own work; and CQs
 * over the device-less completion ring of libcqbench_ring.so. Never used by the binding
 * or the starter.
 */
public final class BenchAccess {

	/**
	 * The binding's own handle for {@code cq->context->ops.poll_cq} (critical, pointer
	 * arguments as longs).
	 */
	public static final MethodHandle POLL_CQ = Ibverbs.FP_POLL_CQ;

	public static final long WC_SIZE = Layouts.WC_SIZE;

	public static final long WC_WR_ID = Layouts.WC_WR_ID;

	public static final long WC_STATUS = Layouts.WC_STATUS;

	private BenchAccess() {
	}

	/**
	 * {@code cq->context->ops.poll_cq}, the provider function {@code ibv_poll_cq} calls.
	 */
	public static MemorySegment pollFn(CompletionQueue cq) {
		return cq.pollFn();
	}

	/** The {@code struct ibv_cq *} of {@code cq}. */
	public static long cqAddress(CompletionQueue cq) {
		return cq.cq;
	}

	/**
	 * A legacy CQ over {@code ring} (a {@code struct ibv_cq_ex *} of libcqbench_ring.so),
	 * polled through its {@code context->ops.poll_cq} as the binding polls a device's CQ.
	 * Closing it leaves the ring alone.
	 */
	public static CompletionQueue ringQueue(MemorySegment ring, MemorySegment destroyFn) {
		MemorySegment cq = ring.reinterpret(Layouts.IBV_CQ_EX.byteSize());
		MemorySegment context = cq.get(ADDRESS, Layouts.CQ_CONTEXT).reinterpret(Layouts.IBV_CONTEXT.byteSize());
		return CompletionQueue.standIn(cq, context.get(ADDRESS, Layouts.CONTEXT_POLL_CQ), destroyFn);
	}

	/**
	 * An extended CQ over {@code ring}, driven one completion per start_poll..end_poll
	 * like the device rows on rxe of rdma-core 44. Closing it leaves the ring alone.
	 */
	public static ExtendedCompletionQueue ringExtendedQueue(MemorySegment ring, CqInitAttributes attributes,
			MemorySegment destroyFn) {
		return ExtendedCompletionQueue.standIn(ring.reinterpret(Layouts.IBV_CQ_EX.byteSize()), attributes, false,
				destroyFn);
	}

	/**
	 * Makes {@code buffer} hold {@code n} completions as if polled from a legacy CQ, with
	 * wr_id = index.
	 */
	public static void fill(WorkCompletionBuffer buffer, int n) {
		MemorySegment wcs = wcsOf(buffer);
		wcs.fill((byte) 0);
		for (int i = 0; i < n; i++) {
			wcs.set(java.lang.foreign.ValueLayout.JAVA_LONG, i * Layouts.WC_SIZE + Layouts.WC_WR_ID, i);
		}
		buffer.filledByPollCq(n);
	}

	/**
	 * Writes {@code wrId} into completion {@code index} of {@code buffer} (the memory
	 * changes, as after a poll).
	 */
	public static void setWrId(WorkCompletionBuffer buffer, int index, long wrId) {
		wcsOf(buffer).set(java.lang.foreign.ValueLayout.JAVA_LONG, index * Layouts.WC_SIZE + Layouts.WC_WR_ID, wrId);
	}

	private static MemorySegment wcsOf(WorkCompletionBuffer buffer) {
		return MemorySegment.ofAddress(buffer.wcsAddress).reinterpret(buffer.capacity() * Layouts.WC_SIZE);
	}

	/** The {@code struct ibv_wc} array of {@code buffer}. */
	public static long wcs(WorkCompletionBuffer buffer) {
		return buffer.wcsAddress;
	}

}
