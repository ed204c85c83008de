package dev.rdma.verbs;

import dev.rdma.verbs.ffm.CqProviderCalls;

import java.lang.foreign.MemorySegment;

/**
 * CQs over memory that is not a device's, for the tests: built with the package-private
 * constructors, so production code has no stand-in path. The CQ calls the functions the
 * memory and the calls table hold exactly as it calls a provider's.
 */
public final class StandIns {

	private StandIns() {
	}

	/**
	 * An extended CQ over {@code fakeCq} (laid out as {@code struct ibv_cq_ex}, its
	 * iterator and readers native functions of the test), destroyed through
	 * {@code destroyFn} (ibv_destroy_cq's signature).
	 */
	public static ExtendedCompletionQueue extended(MemorySegment fakeCq, CqInitAttributes attributes,
			boolean batchIterator, MemorySegment destroyFn) {
		return new ExtendedCompletionQueue(null, fakeCq, attributes, batchIterator, calls(destroyFn));
	}

	/**
	 * A legacy CQ over {@code fakeCq}, polled through {@code pollFn} (the signature of
	 * {@code ibv_context_ops.poll_cq}) and destroyed through {@code destroyFn}.
	 */
	public static CompletionQueue legacy(MemorySegment fakeCq, MemorySegment pollFn, MemorySegment destroyFn) {
		return new CompletionQueue(null, "no device", fakeCq, null, 0,
				new CqProviderCalls(pollFn, MemorySegment.NULL, destroyFn));
	}

	/** The calls table of a stand-in: no poll_cq or req_notify_cq, only a destroy. */
	@SuppressWarnings("exports") // for the tests of dev.rdma.verbs.efa, in this module
	public static CqProviderCalls calls(MemorySegment destroyFn) {
		return new CqProviderCalls(MemorySegment.NULL, MemorySegment.NULL, destroyFn);
	}

}
