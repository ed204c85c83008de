package dev.rdma.spring.boot.autoconfigure.listener;

import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

import dev.rdma.spring.boot.autoconfigure.RdmaProperties.PollingMode;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * Drains one completion queue into its listener on a dedicated platform thread, {@code rdma-poller-<queue>}.
 *
 * <p>The loop ({@link #run()}), in order:
 * <ol>
 *   <li><b>drain</b>: poll batches of up to batch-size completions until the CQ is empty, handing each completion
 *       (or each batch) to the listener;</li>
 *   <li><b>busy</b>: with nothing polled, busy mode (and adaptive mode for {@code spin} after the last completion)
 *       spins with {@link Thread#onSpinWait()} and drains again;</li>
 *   <li><b>arm</b>: event mode arms the CQ ({@code ibv_req_notify_cq}) and <b>drains</b> once more, so a completion
 *       that arrived before the arm is never left waiting for an event that will not come;</li>
 *   <li><b>wait</b> on the channel with this poller's own {@link Waker} and a timeout, so {@link #signalStop()} is
 *       noticed at once and a lost wake-up at the latest after the timeout;</li>
 *   <li><b>get the event</b> ({@code ibv_get_cq_event}, non-blocking): one per wait; more pending events make the
 *       next wait return at once. An event of another CQ sharing the channel was counted on that CQ by the binding;
 *       its poller is woken through its waker;</li>
 *   <li><b>count and ack</b>: the events of this CQ (also those a peer poller took for it) are counted and acked
 *       every ack-batch events; back to 1, which drains and re-arms.</li>
 * </ol>
 * Spurious events (an event whose completion the previous drain already took) are harmless: the drain finds nothing.
 * On exit every got event is acked, so the queue can be destroyed. Nothing is allocated per completion: status counts
 * go to a {@code long[]} and the meters are updated once per batch.
 */
public final class CompletionQueuePoller implements Runnable {

    private static final Log logger = LogFactory.getLog(CompletionQueuePoller.class);

    /** The longest a wait on the channel lasts; the waker normally ends it much sooner. */
    private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    /** Pause after a failed poll (e.g. a CQ in the error state after an overrun). */
    private static final long ERROR_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final String queueName;
    private final CompletionQueue queue;
    private final CompletionChannel channel;
    private final PollingMode mode;
    private final int batchSize;
    private final long spinNanos;
    private final int ackBatch;
    private final RdmaListenerEndpoint endpoint;
    private final ListenerInvoker invoker;
    private final RdmaCompletionErrorHandler errorHandler;
    private final PollerMetrics metrics;
    private final boolean batchListener;
    /** Whether batches are timed: for the listener timer, and for adaptive mode's idle clock. */
    private final boolean clocked;
    private final Function<CompletionQueue, CompletionQueuePoller> peers;
    private final Waker waker = new Waker();
    private final CompletionHandler deliverOne = this::deliverOne;

    private volatile boolean running;
    private volatile Thread thread;

    // Scratch of the poller thread, reset after every batch.
    private final long[] statusCounts = new long[WcStatus.values().length];
    /** Successful completions of the batch (the common case: one increment, no array, no reset per batch). */
    private int successes;
    /** Whether statusCounts holds a failed completion of the batch. */
    private boolean failuresCounted;
    private long listenerNanos;
    /** When the first completion of the current single-completion batch was handed out ({@link #deliverOne}). */
    private long batchStart;
    private boolean batchStarted;
    /** {@link System#nanoTime()} at the end of the last delivered batch (adaptive mode's idle clock). */
    private long lastDelivery;
    private int listenerFailures;
    private Throwable firstFailure;
    private WorkCompletionBuffer buffer;
    private long eventsSeen;
    private boolean pollErrorLogged;

    CompletionQueuePoller(String queueName, CompletionQueue queue, PollingMode mode, int batchSize, long spinNanos,
            int ackBatch, RdmaListenerEndpoint endpoint, RdmaCompletionErrorHandler errorHandler, PollerMetrics metrics,
            Function<CompletionQueue, CompletionQueuePoller> peers) {
        this.queueName = queueName;
        this.queue = queue;
        this.channel = queue.channel();
        this.mode = mode;
        this.batchSize = batchSize;
        this.spinNanos = spinNanos;
        this.ackBatch = ackBatch;
        this.endpoint = endpoint;
        this.invoker = endpoint.invoker();
        this.errorHandler = errorHandler;
        this.metrics = metrics;
        this.batchListener = endpoint.batch();
        this.clocked = metrics != PollerMetrics.NONE || mode == PollingMode.ADAPTIVE;
        this.peers = peers;
        if (mode != PollingMode.BUSY && channel == null) {
            throw new IllegalArgumentException("queue " + queueName + " has no channel for " + mode + " polling");
        }
    }

    // ------------------------------------------------------------------ the loop

    @Override
    public void run() {
        eventsSeen = queue.eventsGot();
        try (WorkCompletionBuffer polled = new WorkCompletionBuffer(batchSize)) {
            this.buffer = polled;
            long idleSince = System.nanoTime();
            while (running) {
                try {
                    // 1. drain
                    if (drain() > 0) {
                        idleSince = lastDelivery;
                        continue;
                    }
                    // 2. busy: spin (busy mode always, adaptive mode for `spin` after the last completion)
                    if (mode == PollingMode.BUSY
                            || (mode == PollingMode.ADAPTIVE && System.nanoTime() - idleSince < spinNanos)) {
                        Thread.onSpinWait();
                        continue;
                    }
                    // 3. arm, then drain what arrived before the arm
                    queue.requestNotify(false);
                    if (drain() > 0) {
                        idleSince = lastDelivery;
                        continue;
                    }
                    // 4. wait on the channel (own waker: stop, or a peer routing our event)
                    if (channel.await(WAIT_NANOS, waker) == CompletionChannel.WaitResult.READY) {
                        // 5. get the event; route one of another CQ to its poller
                        takeEvent();
                    }
                    // 6. count our events and ack them in batches; the next turn drains and re-arms
                    countAndAck(false);
                    idleSince = System.nanoTime();
                }
                catch (RuntimeException ex) {
                    pollFailed(ex);
                }
            }
        }
        finally {
            this.buffer = null;
            countAndAck(true);
        }
    }

    /** Polls until the CQ is empty (or stop is requested); returns the number of completions. */
    private int drain() {
        int total = 0;
        while (running) {
            int n = batchListener ? pollBatch() : pollSingle();
            total += n;
            if (n < batchSize) {
                break;
            }
        }
        return total;
    }

    /**
     * One event per wait, not "until none is left": the last get of such a loop always fails (EAGAIN), one more
     * system call per wake-up, and pending events are found by the next wait anyway.
     */
    private void takeEvent() {
        CompletionQueue fired = channel.getEvent();
        if (fired != null && fired != queue) {
            CompletionQueuePoller peer = peers.apply(fired);
            if (peer != null) {
                peer.waker.wake();
            }
        }
    }

    private void countAndAck(boolean all) {
        try {
            long got = queue.eventsGot();
            if (got != eventsSeen) {
                metrics.events(got - eventsSeen);
                eventsSeen = got;
            }
            long unacked = queue.eventsUnacked();
            if (unacked > 0 && (all || unacked >= ackBatch)) {
                metrics.acks(queue.ackEvents());
            }
        }
        catch (IllegalStateException ex) {
            // the queue is already closed; closing acked every event
        }
    }

    // ------------------------------------------------------------------ delivery

    private int pollSingle() {
        batchStarted = false;
        int n = queue.poll(buffer, deliverOne);
        if (n > 0 && clocked) {
            // two clock reads per batch, not per completion: from the first delivery to the end of the last
            lastDelivery = System.nanoTime();
            listenerNanos += lastDelivery - batchStart;
        }
        flush(n);
        return n;
    }

    private void deliverOne(WorkCompletion completion) {
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
            logger.warn(endpoint.id() + " threw for completion wr_id=" + completion.wrId() + " status="
                    + WcStatus.of(status) + " on queue '" + queueName + "'; polling goes on", ex);
        }
    }

    private int pollBatch() {
        int n = queue.poll(buffer);
        if (n == 0) {
            return 0;
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
                    logger.warn("Error handler '" + endpoint.errorHandler() + "' of queue '" + queueName
                            + "' threw for completion wr_id=" + completion.wrId() + " status=" + WcStatus.of(status), ex);
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
            logger.warn(endpoint.id() + " threw for a batch of " + n + " completions (wr_id " + firstId + " .. "
                    + lastId + ", first status=" + firstStatus + ") on queue '" + queueName + "'; polling goes on", ex);
        }
        if (clocked) {
            lastDelivery = System.nanoTime();
            listenerNanos += lastDelivery - start;
        }
        flush(n);
        return n;
    }

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
            java.util.Arrays.fill(statusCounts, 0);
            failuresCounted = false;
        }
        successes = 0;
        listenerNanos = 0;
        listenerFailures = 0;
        firstFailure = null;
    }

    private void pollFailed(RuntimeException ex) {
        metrics.pollError(ex);
        if (queue.isClosed()) {
            // closed under the poller (not by the container's ordered shutdown): nothing left to poll, ever
            running = false;
            logger.warn("Queue '" + queueName + "' was closed while its poller ran; the poller stops");
            return;
        }
        if (!pollErrorLogged) {
            pollErrorLogged = true;
            logger.error("Polling queue '" + queueName + "' failed (async CQ errors so far: " + queue.asyncErrors()
                    + "); retrying every " + TimeUnit.NANOSECONDS.toMillis(ERROR_PAUSE_NANOS) + " ms", ex);
        }
        if (running && channel != null) {
            channel.await(ERROR_PAUSE_NANOS, waker);
        }
        else if (running) {
            java.util.concurrent.locks.LockSupport.parkNanos(ERROR_PAUSE_NANOS);
        }
    }

    // ------------------------------------------------------------------ lifecycle

    /** Starts the poller thread. */
    public synchronized void start() {
        if (thread != null) {
            return;
        }
        running = true;
        thread = Thread.ofPlatform().name("rdma-poller-" + queueName).daemon(false).unstarted(this);
        thread.start();
    }

    /** Asks the loop to stop after the batch in flight and wakes it. */
    public void signalStop() {
        running = false;
        waker.wake();
    }

    /**
     * Waits until the thread has ended, at most until {@code deadlineNanos} ({@link System#nanoTime()}).
     *
     * @return true when the thread ended
     */
    public boolean awaitStop(long deadlineNanos) {
        Thread t = thread;
        if (t != null) {
            try {
                long left = deadlineNanos - System.nanoTime();
                if (left > 0) {
                    t.join(java.time.Duration.ofNanos(left));
                }
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
            if (t.isAlive()) {
                return false;
            }
        }
        waker.close();
        return true;
    }

    /** Stops the poller: {@link #signalStop()} and {@link #awaitStop} with a timeout. */
    public boolean stop(java.time.Duration timeout) {
        signalStop();
        return awaitStop(System.nanoTime() + timeout.toNanos());
    }

    public String queue() {
        return queueName;
    }

    public CompletionQueue completionQueue() {
        return queue;
    }

    public PollingMode mode() {
        return mode;
    }

    /** The poller thread, null before start. */
    public Thread thread() {
        return thread;
    }

    public boolean isRunning() {
        Thread t = thread;
        return t != null && t.isAlive();
    }
}
