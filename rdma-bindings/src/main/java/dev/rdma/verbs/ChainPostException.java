package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

/**
 * The provider refused one element of a chain of work requests posted in one call
 * ({@code ibv_post_send}, {@code ibv_post_recv} or {@code ibv_post_srq_recv} with a
 * list): {@code bad_wr} named {@link #failedIndex()}. The elements before it were posted
 * and complete as usual; it and every element after it were not posted.
 *
 * <p>
 * {@link #failedIndex()} is -1 when the provider failed without naming an element
 * ({@code bad_wr} NULL, e.g. rxe's doorbell after every element was queued): then which
 * elements were posted is not known, and {@link #postedCount()} is -1 too.
 */
public final class ChainPostException extends VerbsException {

	private static final long serialVersionUID = 1L;

	private final int failedIndex;

	private final int chainLength;

	private final long failedWrId;

	ChainPostException(String verb, int errno, int failedIndex, int chainLength, long failedWrId,
			@Nullable String what) {
		super(verb, errno, describe(failedIndex, chainLength, failedWrId, what));
		this.failedIndex = failedIndex;
		this.chainLength = chainLength;
		this.failedWrId = failedWrId;
	}

	private static String describe(int failedIndex, int chainLength, long failedWrId, @Nullable String what) {
		String element = failedIndex < 0 ? "the provider named no element of the chain of " + chainLength
				: "element " + failedIndex + " of a chain of " + chainLength + " (wr_id " + failedWrId
						+ ") refused; the " + failedIndex + " before it were posted, none after it";
		return what == null ? element : what + ": " + element;
	}

	/**
	 * The position in the list of the element {@code bad_wr} named, or -1 when it named
	 * none.
	 */
	public int failedIndex() {
		return failedIndex;
	}

	/**
	 * How many elements were posted: {@link #failedIndex()} (those before it), or -1 when
	 * unknown.
	 */
	public int postedCount() {
		return failedIndex;
	}

	/** The length of the chain. */
	public int chainLength() {
		return chainLength;
	}

	/** The {@code wr_id} of the refused element (0 when unknown). */
	public long failedWrId() {
		return failedWrId;
	}

}
