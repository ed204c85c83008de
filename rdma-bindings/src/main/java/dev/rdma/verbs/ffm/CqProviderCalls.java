package dev.rdma.verbs.ffm;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The provider functions a completion queue calls, read once at creation: {@code poll_cq}
 * and {@code req_notify_cq} of the context's ops (NULL where the provider has none) and
 * the destroy function. The CQ calls exactly these, so a CQ over memory that is not a
 * device's (the tests' and benchmarks' rings) is polled like a provider's when its table
 * holds native functions of theirs.
 *
 * @param pollCq {@code context->ops.poll_cq}
 * @param reqNotifyCq {@code context->ops.req_notify_cq}
 * @param destroyCq a function with {@code ibv_destroy_cq}'s signature
 */
public record CqProviderCalls(MemorySegment pollCq, MemorySegment reqNotifyCq, MemorySegment destroyCq) {

	/**
	 * The functions of the provider of {@code context} (a {@code struct ibv_context *}
	 * readable up to its ops), and libibverbs' {@code ibv_destroy_cq}.
	 */
	public static CqProviderCalls of(MemorySegment context) {
		return new CqProviderCalls(context.get(ADDRESS, Layouts.CONTEXT_POLL_CQ),
				context.get(ADDRESS, Layouts.CONTEXT_REQ_NOTIFY_CQ), Ibverbs.DESTROY_CQ_FUNCTION);
	}

}
