package dev.rdma.spring.listener;

import java.util.Arrays;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * The dispatch of one poller: hands each completion (or each batch) to the listener,
 * failed completions to the error handler when there is one, counts completions per
 * status and listener failures for the batch, times the listener calls, and reports the
 * batch to the {@link PollerMetrics} once it is delivered. A listener or error handler
 * that throws is counted and logged; the poller goes on. Used by the poller thread only.
 *
 * <p>
 * Nothing is allocated per completion: status counts go to a {@code long[]}, the clock is
 * read twice per batch (and only when batches are timed), and the meters are updated once
 * per batch.
 */
final class CompletionDispatcher implements CompletionHandler {

	private static final Log logger = LogFactory.getLog(CompletionDispatcher.class);

	private final String queueName;

	private final String listenerId;

	private final ListenerInvoker invoker;

	private final @Nullable RdmaCompletionErrorHandler errorHandler;

	private final @Nullable String errorHandlerName;

	private final PollerMetrics metrics;

	/**
	 * Whether batches are timed: for the listener timer, and for adaptive mode's idle
	 * clock.
	 */
	private final boolean clocked;

	// Scratch of the poller thread, reset after every batch.
	private final long[] statusCounts = new long[WcStatus.values().length];

	/**
	 * Successful completions of the batch (the common case: one increment, no array, no
	 * reset per batch).
	 */
	private int successes;

	/** Whether statusCounts holds a failed completion of the batch. */
	private boolean failuresCounted;

	private long listenerNanos;

	/**
	 * When the first completion of the current single-completion batch was handed out
	 * ({@link #onCompletion}).
	 */
	private long batchStart;

	private boolean batchStarted;

	/**
	 * {@link System#nanoTime()} at the end of the last delivered batch (adaptive mode's
	 * idle clock).
	 */
	private long lastDelivery;

	private int listenerFailures;

	private @Nullable Throwable firstFailure;

	CompletionDispatcher(String queueName, String listenerId, ListenerInvoker invoker,
			@Nullable RdmaCompletionErrorHandler errorHandler, @Nullable String errorHandlerName, PollerMetrics metrics,
			boolean clocked) {
		this.queueName = queueName;
		this.listenerId = listenerId;
		this.invoker = invoker;
		this.errorHandler = errorHandler;
		this.errorHandlerName = errorHandlerName;
		this.metrics = metrics;
		this.clocked = clocked;
	}

	/**
	 * {@link System#nanoTime()} at the end of the last delivered batch; maintained only
	 * when batches are timed.
	 */
	long lastDelivery() {
		return lastDelivery;
	}

	// ------------------------------------------------------------------ one call per
	// completion

	/** Before a poll that hands its completions to {@link #onCompletion} one by one. */
	void startBatch() {
		batchStarted = false;
	}

	/** One completion of the poll in progress (the poll calls this for each). */
	@Override
	public void onCompletion(WorkCompletion completion) {
		if (!batchStarted && clocked) {
			batchStarted = true;
			batchStart = System.nanoTime();
		}
		int status = completion.statusCode();
		count(status);
		try {
			if (status != 0 && errorHandler != null) {
				errorHandler.onFailedCompletion(queueName, completion);
			}
			else {
				invoker.invoke(completion);
			}
		}
		catch (Throwable ex) {
			listenerFailed(ex);
			logger.warn(listenerId + " threw for completion wr_id=" + completion.wrId() + " status="
					+ WcStatus.of(status) + " on queue '" + queueName + "'; polling goes on", ex);
		}
	}

	/** After the poll: {@code n} completions went to {@link #onCompletion}. */
	void endBatch(int n) {
		if (n > 0) {
			try {
				invoker.batchEnded();
			}
			catch (Throwable ex) {
				listenerFailed(ex);
				logger.warn(listenerId + " threw at the end of a batch on queue '" + queueName + "'; polling goes on",
						ex);
			}
		}
		if (n > 0 && clocked) {
			// two clock reads per batch, not per completion: from the first delivery to
			// the end of the last
			lastDelivery = System.nanoTime();
			listenerNanos += lastDelivery - batchStart;
		}
		flush(n);
	}

	// ------------------------------------------------------------------ one call per
	// batch

	/**
	 * Hands the {@code n} completions a poll put into {@code buffer} to a batch listener;
	 * nothing when n is 0.
	 */
	void deliverBatch(WorkCompletionBuffer buffer, int n) {
		if (n == 0) {
			return;
		}
		long start = clocked ? System.nanoTime() : 0;
		for (int i = 0; i < n; i++) {
			WorkCompletion completion = buffer.get(i);
			int status = completion.statusCode();
			count(status);
			if (status != 0 && errorHandler != null) {
				try {
					errorHandler.onFailedCompletion(queueName, completion);
				}
				catch (Throwable ex) {
					listenerFailed(ex);
					logger.warn("Error handler '" + errorHandlerName + "' of queue '" + queueName
							+ "' threw for completion wr_id=" + completion.wrId() + " status=" + WcStatus.of(status),
							ex);
				}
			}
		}
		try {
			invoker.invoke(buffer);
		}
		catch (Throwable ex) {
			listenerFailed(ex);
			WorkCompletion first = buffer.get(0);
			long firstId = first.wrId();
			WcStatus firstStatus = first.status();
			long lastId = buffer.get(n - 1).wrId();
			logger.warn(listenerId + " threw for a batch of " + n + " completions (wr_id " + firstId + " .. " + lastId
					+ ", first status=" + firstStatus + ") on queue '" + queueName + "'; polling goes on", ex);
		}
		if (clocked) {
			lastDelivery = System.nanoTime();
			listenerNanos += lastDelivery - start;
		}
		flush(n);
	}

	// ------------------------------------------------------------------ counting

	private void count(int status) {
		if (status == 0) {
			successes++;
		}
		else {
			statusCounts[WcStatus.of(status).ordinal()]++;
			failuresCounted = true;
		}
	}

	private void listenerFailed(Throwable ex) {
		if (listenerFailures++ == 0) {
			firstFailure = ex;
		}
	}

	/** Updates the meters once for the batch just delivered and resets the scratch. */
	private void flush(int n) {
		if (n == 0) {
			return;
		}
		if (metrics != PollerMetrics.NONE) {
			statusCounts[WcStatus.SUCCESS.ordinal()] = successes;
			metrics.batch(n, statusCounts);
			metrics.listener(listenerNanos, listenerFailures, firstFailure);
			statusCounts[WcStatus.SUCCESS.ordinal()] = 0;
		}
		if (failuresCounted) {
			Arrays.fill(statusCounts, 0);
			failuresCounted = false;
		}
		successes = 0;
		listenerNanos = 0;
		listenerFailures = 0;
		firstFailure = null;
	}

}
