package dev.rdma.spring.listener;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * The poll loop of one completion queue, run by its container's thread
 * ({@code rdma-poller-<queue>}); what happens to each completion is the
 * {@link CompletionDispatcher}'s business.
 *
 * <p>
 * The loop ({@link #run()}), in order:
 * <ol start="0">
 * <li><b>close what was handed over</b>: what a listener on this thread handed to
 * {@link PollerThreads#closeWhenPollEnds} (a connection it closed or restarted: its QP,
 * buffers, channel) is closed at the start of the next turn, outside any poll;</li>
 * <li><b>drain</b>: poll batches of up to batch-size completions until the CQ is empty,
 * handing each completion (or each batch) to the dispatcher;</li>
 * <li><b>busy</b>: with nothing polled, busy mode (and adaptive and backoff mode for
 * {@code spin} after the last completion) spins with {@link Thread#onSpinWait()} and
 * drains again;</li>
 * <li><b>back off</b>: backoff mode then sleeps ({@link LockSupport#parkNanos}), each
 * pause twice the last up to {@code max-sleep}, and drains again; a completion resets the
 * pause. An idle queue costs next to no CPU and needs no channel;</li>
 * <li><b>arm</b>: event mode arms the CQ ({@code ibv_req_notify_cq}) and <b>drains</b>
 * once more, so a completion that arrived before the arm is never left waiting for an
 * event that will not come;</li>
 * <li><b>wait</b> on the channel with this poller's own {@link Waker} and a timeout, so
 * {@link #stop()} (followed by a wake-up) is noticed at once and a lost wake-up at the
 * latest after the timeout;</li>
 * <li><b>get the event</b> ({@code ibv_get_cq_event}, non-blocking): one per wait; more
 * pending events make the next wait return at once. An event of another CQ sharing the
 * channel was counted on that CQ by the binding; its poller is woken through the
 * {@link CompletionEventRouter};</li>
 * <li><b>count and ack</b>: the events of this CQ (also those a peer poller took for it)
 * are counted and acked every ack-batch events; back to 1, which drains and re-arms.
 * After a wait that timed out that drain is also the re-poll of the armed queue: a
 * provider can lose an event (docs/reliability.md), and what it finds is delivered at
 * most one timeout late instead of never; when no event for the queue comes by the next
 * timeout either, the event was lost: counted ({@link PollerMetrics#missedEvent()}) and
 * logged.</li>
 * </ol>
 * Spurious events (an event whose completion the previous drain already took) are
 * harmless: the drain finds nothing. On exit every got event is acked, so the queue can
 * be destroyed, and what a shutdown run by the listener on this thread could not close
 * inside the poll is closed ({@link PollerThreads}). Nothing is allocated per completion.
 */
final class PollLoop implements Runnable {

	private static final Log logger = LogFactory.getLog(PollLoop.class);

	/**
	 * The longest a wait on the channel lasts; the waker normally ends it much sooner.
	 */
	private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

	/** Backoff mode: the first pause after the spin (the pauses double from here). */
	private static final long MIN_SLEEP_NANOS = TimeUnit.MICROSECONDS.toNanos(1);

	/** Pause after a failed poll (e.g. a CQ in the error state after an overrun). */
	private static final long ERROR_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

	private final String queueName;

	private final CompletionQueue queue;

	/** The queue's channel; null only in busy mode. */
	private final @Nullable CompletionChannel channel;

	private final PollingMode mode;

	private final int batchSize;

	private final long spinNanos;

	private final int ackBatch;

	private final long maxSleepNanos;

	private final boolean batchListener;

	private final CompletionDispatcher dispatcher;

	private final PollerMetrics metrics;

	private final CompletionEventRouter router;

	private final Waker waker;

	private volatile boolean running = true;

	// Scratch of the poller thread.
	private long eventsSeen;

	private boolean pollErrorLogged;

	/** The last wait on the armed queue ended by its timeout. */
	private boolean timedOut;

	/**
	 * {@link #eventsSeen} when a drain after a timed-out wait found completions, -1 if
	 * none.
	 */
	private long eventsAtRepoll = -1;

	private boolean missedEventLogged;

	/**
	 * The end of the last delivered batch ({@link CompletionDispatcher#lastDelivery()}),
	 * or the loop's start: where adaptive and backoff mode's spin is counted from.
	 */
	private long idleSince;

	/** Backoff mode: the next pause. */
	private long sleepNanos = MIN_SLEEP_NANOS;

	PollLoop(String queueName, CompletionQueue queue, PollingMode mode, PollerSettings settings, boolean batchListener,
			CompletionDispatcher dispatcher, PollerMetrics metrics, CompletionEventRouter router, Waker waker) {
		this.queueName = queueName;
		this.queue = queue;
		this.channel = queue.channel();
		this.mode = mode;
		this.batchSize = settings.batchSize();
		this.spinNanos = Deadlines.nanos(settings.spin());
		this.ackBatch = settings.ackBatch();
		this.maxSleepNanos = Deadlines.nanos(settings.maxSleep());
		this.batchListener = batchListener;
		this.dispatcher = dispatcher;
		this.metrics = metrics;
		this.router = router;
		this.waker = waker;
		if (mode.needsChannel() && channel == null) {
			throw new IllegalArgumentException("queue " + queueName + " has no channel for " + mode + " polling");
		}
		if (batchSize < 1 || ackBatch < 1 || spinNanos < 0 || maxSleepNanos <= 0) {
			throw new IllegalArgumentException("queue " + queueName + ": batch size and ack batch must be at least 1,"
					+ " spin must not be negative and max sleep must be positive (" + settings + ")");
		}
	}

	// ------------------------------------------------------------------ the loop

	@Override
	public void run() {
		ArrayDeque<AutoCloseable> deferred = PollerThreads.enter();
		eventsSeen = queue.eventsGot();
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(batchSize)) {
			idleSince = System.nanoTime();
			while (running) {
				try {
					turn(deferred, buffer);
				}
				catch (RuntimeException ex) {
					pollFailed(ex);
				}
			}
		}
		catch (Error ex) {
			logger.error("Poller thread of queue '" + queueName + "' failed; the queue is no longer polled", ex);
			throw ex;
		}
		finally {
			countAndAck(true);
			// what a listener's shutdown could not close inside the poll (this queue,
			// its channel, its device)
			PollerThreads.exit();
		}
	}

	/**
	 * One turn of the loop, steps 0 to 7 (each {@code return} is the loop's next turn). A
	 * method of its own, not the body of {@link #run()}'s loop: the JIT compiles it as a
	 * method once it has been called often enough, where the loop of a method that is
	 * entered once would only be compiled on-stack, and in event mode (a few turns per
	 * message) stayed at C1 with profiling for the whole run.
	 */
	private void turn(ArrayDeque<AutoCloseable> deferred, WorkCompletionBuffer buffer) {
		// 0. what a listener handed over to be closed once its poll had returned (a
		// connection's QP and buffers): closed now, while the application runs on
		if (!deferred.isEmpty()) {
			PollerThreads.closeDeferred();
		}
		// 1. drain (after a timed-out wait: the re-poll of the armed queue)
		int drained = drain(buffer);
		if (timedOut) {
			timedOut = false;
			if (drained > 0) {
				eventsAtRepoll = eventsSeen;
			}
		}
		if (drained > 0) {
			idleSince = dispatcher.lastDelivery();
			sleepNanos = MIN_SLEEP_NANOS;
			return;
		}
		// 2. busy: spin (busy mode always, adaptive and backoff mode for `spin` after
		// the last completion)
		if (mode == PollingMode.BUSY || (mode != PollingMode.EVENT && System.nanoTime() - idleSince < spinNanos)) {
			Thread.onSpinWait();
			return;
		}
		// 3. back off: sleep, each pause twice the last, then drain again
		if (mode == PollingMode.BACKOFF) {
			LockSupport.parkNanos(sleepNanos);
			sleepNanos = Math.min(sleepNanos * 2, maxSleepNanos);
			return;
		}
		// 4. arm, then drain what arrived before the arm
		queue.requestNotify(false);
		if (drain(buffer) > 0) {
			idleSince = dispatcher.lastDelivery();
			return;
		}
		// 5. wait on the channel (own waker: stop, or a peer routing our event)
		CompletionChannel.WaitResult result = channel.await(WAIT_NANOS, waker);
		if (result == CompletionChannel.WaitResult.READY) {
			// 6. get the event; route one of another CQ to its poller
			takeEvent(channel);
		}
		// 7. count our events and ack them in batches; the next turn drains and re-arms
		countAndAck(false);
		if (result == CompletionChannel.WaitResult.TIMEOUT) {
			missedEventCheck();
			timedOut = true;
		}
		// idleSince stays the last delivery's: a wait that ended without work (timeout,
		// a wake-up, an event a peer took) starts no new spin
	}

	/**
	 * Polls until the CQ is empty (or stop is requested); returns the number of
	 * completions.
	 */
	private int drain(WorkCompletionBuffer buffer) {
		int total = 0;
		while (running) {
			int n;
			if (batchListener) {
				n = queue.poll(buffer); // up to batch-size completions into the buffer
										// ...
				dispatcher.deliverBatch(buffer, n); // ... then the listener once for all
													// of them
			}
			else {
				dispatcher.startBatch();
				n = queue.poll(buffer, dispatcher); // the listener once per completion,
													// during the poll
				dispatcher.endBatch(n);
			}
			total += n;
			if (n < batchSize) {
				break;
			}
		}
		return total;
	}

	/**
	 * One event per wait, not "until none is left": the last get of such a loop always
	 * fails (EAGAIN), one more system call per wake-up, and pending events are found by
	 * the next wait anyway.
	 */
	private void takeEvent(CompletionChannel channel) {
		CompletionQueue fired = channel.getEvent();
		if (fired != null && fired != queue) {
			router.wake(fired); // or acks it, when its queue's container stopped
		}
	}

	/**
	 * After a timed-out wait: when the re-poll before it found completions and no event
	 * of the queue was counted since, their event never came.
	 */
	private void missedEventCheck() {
		if (eventsAtRepoll < 0) {
			return;
		}
		if (eventsSeen == eventsAtRepoll) {
			metrics.missedEvent();
			if (!missedEventLogged) {
				missedEventLogged = true;
				logger.warn("Queue '" + queueName + "' had completions whose completion event never came (the"
						+ " provider lost it); its poller found them by re-polling after a wait of "
						+ TimeUnit.NANOSECONDS.toMillis(WAIT_NANOS) + " ms. Further ones are counted in"
						+ " rdma.events.missed");
			}
		}
		eventsAtRepoll = -1;
	}

	private void countAndAck(boolean all) {
		eventsSeen = CompletionEvents.countAndAck(queue, metrics, eventsSeen, ackBatch, all);
	}

	private void pollFailed(RuntimeException ex) {
		metrics.pollError(ex);
		if (queue.isClosed()) {
			// closed under the poller (not by the container's ordered shutdown): nothing
			// left to poll, ever
			running = false;
			logger.warn("Queue '" + queueName + "' was closed while its poller ran; the poller stops");
			return;
		}
		if (!pollErrorLogged) {
			pollErrorLogged = true;
			logger.error("Polling queue '" + queueName + "' failed (async CQ errors so far: " + queue.asyncErrors()
					+ "); retrying every " + TimeUnit.NANOSECONDS.toMillis(ERROR_PAUSE_NANOS) + " ms", ex);
		}
		// a pause that ends at its deadline (or at stop: signalStop unparks this thread),
		// not when the channel is readable: a failing queue's pending event would end a
		// wait on the channel at once, and the loop would retry at full speed
		long deadline = System.nanoTime() + ERROR_PAUSE_NANOS;
		long left;
		while (running && (left = deadline - System.nanoTime()) > 0) {
			LockSupport.parkNanos(left);
		}
	}

	/**
	 * Asks the loop to end after the batch in flight; the caller wakes the waker so that
	 * a wait returns at once.
	 */
	void stop() {
		running = false;
	}

}
