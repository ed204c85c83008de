package dev.rdma.verbs;

/**
 * The completions of one poll, in CQ order. Valid only during the callback that receives
 * it; {@link #get(int)} returns a view that is reused for every index (see
 * {@link WorkCompletion} for the lifetime rules).
 */
public interface CompletionBatch {

	/** Number of completions in this batch. */
	int size();

	/**
	 * The completion at {@code index} (0 = oldest); the returned view is reused by the
	 * next call.
	 */
	WorkCompletion get(int index);

}
