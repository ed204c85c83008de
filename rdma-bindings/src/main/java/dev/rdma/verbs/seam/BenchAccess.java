package dev.rdma.verbs.seam;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.ffm.CqProviderCalls;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Benchmarks only (the diagnosis cases of docs/benchmarks-history.md, "Where the time
 * goes"): what the binding's poll path calls, without the binding around it, so that a
 * run can split the Java/C gap into the FFM downcall itself and the binding's own work;
 * and CQs over the device-less completion ring of libcqbench_ring.so. Never used by the
 * binding or the starter.
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

	private static final MethodHandle NEW_CQ;

	private static final MethodHandle NEW_EXTENDED_CQ;

	private static final MethodHandle POLL_FN;

	private static final MethodHandle FILLED_BY_POLL_CQ;

	private static final VarHandle CQ;

	private static final VarHandle WCS_ADDRESS;

	static {
		try {
			MethodHandles.Lookup own = MethodHandles.lookup();
			MethodHandles.Lookup cq = MethodHandles.privateLookupIn(CompletionQueue.class, own);
			NEW_CQ = cq.findConstructor(CompletionQueue.class, MethodType.methodType(void.class, Context.class,
					String.class, MemorySegment.class, CompletionChannel.class, int.class, CqProviderCalls.class));
			POLL_FN = cq.findVirtual(CompletionQueue.class, "pollFn", MethodType.methodType(MemorySegment.class));
			CQ = cq.findVarHandle(CompletionQueue.class, "cq", long.class);
			NEW_EXTENDED_CQ = MethodHandles.privateLookupIn(ExtendedCompletionQueue.class, own)
				.findConstructor(ExtendedCompletionQueue.class, MethodType.methodType(void.class, Context.class,
						MemorySegment.class, CqInitAttributes.class, boolean.class, CqProviderCalls.class));
			MethodHandles.Lookup buffer = MethodHandles.privateLookupIn(WorkCompletionBuffer.class, own);
			FILLED_BY_POLL_CQ = buffer.findVirtual(WorkCompletionBuffer.class, "filledByPollCq",
					MethodType.methodType(void.class, int.class));
			WCS_ADDRESS = buffer.findVarHandle(WorkCompletionBuffer.class, "wcsAddress", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private BenchAccess() {
	}

	/**
	 * {@code cq->context->ops.poll_cq}, the provider function {@code ibv_poll_cq} calls.
	 */
	public static MemorySegment pollFn(CompletionQueue cq) {
		try {
			return (MemorySegment) POLL_FN.invokeExact(cq);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/** The {@code struct ibv_cq *} of {@code cq}. */
	public static long cqAddress(CompletionQueue cq) {
		return (long) CQ.get(cq);
	}

	/**
	 * A legacy CQ over {@code ring} (a {@code struct ibv_cq_ex *} of libcqbench_ring.so),
	 * polled through its {@code context->ops.poll_cq} as the binding polls a device's CQ,
	 * destroyed through {@code destroyFn} (ibv_destroy_cq's signature). Closing it leaves
	 * the ring alone.
	 */
	public static CompletionQueue ringQueue(MemorySegment ring, MemorySegment destroyFn) {
		MemorySegment cq = ring.reinterpret(Layouts.IBV_CQ_EX.byteSize());
		MemorySegment context = cq.get(ADDRESS, Layouts.CQ_CONTEXT).reinterpret(Layouts.IBV_CONTEXT.byteSize());
		MemorySegment pollFn = context.get(ADDRESS, Layouts.CONTEXT_POLL_CQ);
		if (Native.isNull(pollFn)) {
			throw new IllegalArgumentException("the ring has no poll_cq function");
		}
		try {
			return (CompletionQueue) NEW_CQ.invokeExact((@Nullable Context) null, "no device", cq,
					(@Nullable CompletionChannel) null, 0, new CqProviderCalls(pollFn, MemorySegment.NULL, destroyFn));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * An extended CQ over {@code ring}, driven one completion per start_poll..end_poll
	 * like the device rows on rxe of rdma-core 44. Closing it leaves the ring alone.
	 */
	public static ExtendedCompletionQueue ringExtendedQueue(MemorySegment ring, CqInitAttributes attributes,
			MemorySegment destroyFn) {
		MemorySegment cq = ring.reinterpret(Layouts.IBV_CQ_EX.byteSize());
		for (String f : new String[] { "start_poll", "next_poll", "end_poll" }) {
			if (Native.isNull(cq.get(ADDRESS, Layouts.off(Layouts.IBV_CQ_EX, f)))) {
				throw new IllegalArgumentException("the ring's " + f + " is NULL");
			}
		}
		try {
			return (ExtendedCompletionQueue) NEW_EXTENDED_CQ.invokeExact((@Nullable Context) null, cq, attributes,
					false, new CqProviderCalls(MemorySegment.NULL, MemorySegment.NULL, destroyFn));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * Makes {@code buffer} hold {@code n} completions as if polled from a legacy CQ, with
	 * wr_id = index.
	 */
	public static void fill(WorkCompletionBuffer buffer, int n) {
		MemorySegment wcs = wcsOf(buffer);
		wcs.fill((byte) 0);
		for (int i = 0; i < n; i++) {
			wcs.set(JAVA_LONG, i * Layouts.WC_SIZE + Layouts.WC_WR_ID, i);
		}
		try {
			FILLED_BY_POLL_CQ.invokeExact(buffer, n);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * Writes {@code wrId} into completion {@code index} of {@code buffer} (the memory
	 * changes, as after a poll).
	 */
	public static void setWrId(WorkCompletionBuffer buffer, int index, long wrId) {
		wcsOf(buffer).set(JAVA_LONG, index * Layouts.WC_SIZE + Layouts.WC_WR_ID, wrId);
	}

	private static MemorySegment wcsOf(WorkCompletionBuffer buffer) {
		return MemorySegment.ofAddress(wcs(buffer)).reinterpret(buffer.capacity() * Layouts.WC_SIZE);
	}

	/** The {@code struct ibv_wc} array of {@code buffer}. */
	public static long wcs(WorkCompletionBuffer buffer) {
		return (long) WCS_ADDRESS.get(buffer);
	}

}
