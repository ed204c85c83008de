package dev.rdma.spring.listener;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * One queue of a {@link GroupPollLoop} thread: what the loop needs to poll it, and its
 * bookkeeping there: the events counted and acked, the pause after a failed poll, the
 * lost events the re-poll found, and what happens when it leaves the thread. The
 * containers hand a member to their {@link PollerGroup}; only its thread touches the
 * scratch fields.
 */
final class GroupMember {

	/** The loop's log: the lines about a queue of a group thread come from the loop. */
	private static final Log logger = LogFactory.getLog(GroupPollLoop.class);

	/** Pause of a queue after a failed poll (e.g. a CQ in the error state). */
	static final long ERROR_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

	final String queueName;

	final CompletionQueue queue;

	final CompletionDispatcher dispatcher;

	final PollerMetrics metrics;

	final boolean batchListener;

	final int batchSize;

	final int ackBatch;

	/** Opens once the queue has left its thread with every got event acked. */
	final CountDownLatch left = new CountDownLatch(1);

	/** The router's way to this queue: mark it and wake its thread. */
	final Runnable routeTarget = this::eventRouted;

	/** The thread that took the queue in; null until then. */
	volatile @Nullable Thread polledBy;

	/**
	 * The loop the queue was assigned to by its join (kept after it left): until the
	 * thread takes the queue in, that thread is its poller all the same.
	 */
	volatile @Nullable GroupPollLoop assigned;

	/**
	 * Run by the thread once the queue has left it: the rest of the container's stop
	 * (idempotent; also run by {@code awaitStop} on another thread).
	 */
	volatile @Nullable Runnable afterLeave;

	/** The channel's epoll token on its thread, -1 without channel (busy mode). */
	int token = -1;

	volatile @Nullable GroupPollLoop loop;

	volatile boolean running = true;

	/** An event of this queue was taken by another poller. */
	volatile boolean routed;

	// Scratch of the poller thread.
	@Nullable WorkCompletionBuffer buffer;

	long eventsSeen;

	boolean queued;

	long pausedUntil;

	boolean pollErrorLogged;

	/**
	 * {@link #eventsSeen} when a sweep last found completions of the armed queue, -1 if
	 * none.
	 */
	long eventsAtSweep = -1;

	boolean missedEventLogged;

	GroupMember(String queueName, CompletionQueue queue, CompletionDispatcher dispatcher, PollerMetrics metrics,
			boolean batchListener, int batchSize, int ackBatch) {
		this.queueName = queueName;
		this.queue = queue;
		this.dispatcher = dispatcher;
		this.metrics = metrics;
		this.batchListener = batchListener;
		this.batchSize = batchSize;
		this.ackBatch = ackBatch;
	}

	private void eventRouted() {
		GroupPollLoop l = loop;
		if (l != null) {
			routed = true;
			l.eventRouted();
		}
	}

	/**
	 * The thread that polls the queue while it is on one: the thread that took it in, or,
	 * assigned but not taken in yet (its thread is busy, e.g. in the listener that is
	 * stopping its container), the thread that will; null once it has left.
	 */
	@Nullable Thread poller() {
		if (left.getCount() == 0) {
			return null;
		}
		Thread poller = polledBy;
		if (poller == null) {
			GroupPollLoop a = assigned;
			poller = a == null ? null : a.thread();
		}
		return poller;
	}

	/**
	 * Waits until the queue has left its thread with every got event acked, at most until
	 * {@code deadlineNanos} ({@link System#nanoTime()}).
	 * @return false when the deadline passed or the wait was interrupted
	 */
	boolean awaitLeft(long deadlineNanos) {
		try {
			return left.await(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			return false;
		}
	}

	// ------------------------------------------------------------------ on its thread

	/** The thread takes the queue in: its buffer is made there. */
	void takenIn() {
		buffer = new WorkCompletionBuffer(batchSize);
		eventsSeen = queue.eventsGot();
		polledBy = Thread.currentThread();
	}

	/**
	 * Counts the events got since the last call and acks them every ack-batch events, or
	 * all of them.
	 */
	void countAndAck(boolean all) {
		eventsSeen = CompletionEvents.countAndAck(queue, metrics, eventsSeen, ackBatch, all);
	}

	/** Whether the queue pauses after a failed poll; clears the pause once it is over. */
	boolean paused() {
		if (pausedUntil == 0) {
			return false;
		}
		if (System.nanoTime() - pausedUntil < 0) {
			return true;
		}
		pausedUntil = 0;
		return false;
	}

	/**
	 * A poll (or arm) of the queue failed on thread {@code threadName}: counted, logged
	 * once, and the queue pauses; a closed queue is no longer polled.
	 */
	void pollFailed(RuntimeException ex, String threadName) {
		metrics.pollError(ex);
		if (queue.isClosed()) {
			running = false;
			logger.warn(
					"Queue '" + queueName + "' was closed while its poller ran; '" + threadName + "' stops polling it");
			return;
		}
		if (!pollErrorLogged) {
			pollErrorLogged = true;
			logger.error("Polling queue '" + queueName + "' failed in '" + threadName + "' (async CQ errors so far: "
					+ queue.asyncErrors() + "); retrying every " + TimeUnit.NANOSECONDS.toMillis(ERROR_PAUSE_NANOS)
					+ " ms", ex);
		}
		long until = System.nanoTime() + ERROR_PAUSE_NANOS;
		pausedUntil = until == 0 ? 1 : until;
	}

	/**
	 * The re-poll of thread {@code threadName} found completions whose event never came:
	 * counted, logged once.
	 */
	void missedEvent(String threadName) {
		metrics.missedEvent();
		if (!missedEventLogged) {
			missedEventLogged = true;
			logger.warn("Queue '" + queueName + "' had completions whose completion event never came (the"
					+ " provider lost it); '" + threadName + "' found them by re-polling its armed queues every "
					+ TimeUnit.NANOSECONDS.toMillis(GroupPollLoop.SWEEP_NANOS) + " ms. Further ones are counted in"
					+ " rdma.events.missed");
		}
	}

	/**
	 * The queue leaves its thread: all its got events acked, its container told, its
	 * buffer freed.
	 */
	void leave() {
		countAndAck(true);
		left.countDown();
		WorkCompletionBuffer b = buffer;
		if (b != null) {
			b.close();
			buffer = null;
		}
		runAfterLeave();
	}

	/** The queue was handed to a thread that never took it in (the thread failed). */
	void abandon() {
		left.countDown();
		runAfterLeave();
	}

	/** The container's end of the stop (it may not have been able to wait for it). */
	private void runAfterLeave() {
		Runnable then = afterLeave;
		if (then != null) {
			then.run();
		}
	}

}
