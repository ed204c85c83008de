package dev.rdma.spring.connection;

import java.util.Arrays;

import org.jspecify.annotations.Nullable;

/**
 * Thrown by {@link SendBatch#send()} when the provider refused part of the batch's chain
 * ({@code ibv_post_send} failed at one element: that element and the ones after it were
 * not posted): {@link #notSent()} names the positions in the batch of the messages that
 * were not sent; the others were posted and complete as usual. In practice a post is
 * refused only while the connection is closing. The messages not sent are counted in
 * {@link ConnectionStatistics#sendsRefused()} and {@code sendErrors}.
 */
public class SendRefusedException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	private final int[] notSent;

	private final int batchSize;

	public SendRefusedException(String message, int[] notSent, int batchSize, @Nullable Throwable cause) {
		super(message, cause);
		this.notSent = notSent.clone();
		this.batchSize = batchSize;
	}

	/** The positions (from 0, in the order added) of the messages not sent, ascending. */
	public int[] notSent() {
		return notSent.clone();
	}

	/** How many messages of the batch were not sent. */
	public int notSentCount() {
		return notSent.length;
	}

	/** The number of messages of the batch. */
	public int batchSize() {
		return batchSize;
	}

	@Override
	public String toString() {
		return super.toString() + " (not sent: " + Arrays.toString(notSent) + " of " + batchSize + ")";
	}

}
