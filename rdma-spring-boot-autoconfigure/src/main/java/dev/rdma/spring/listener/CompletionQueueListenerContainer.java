package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Waker;

/**
 * Runs the listener of one completion queue: owns the poller thread,
 * {@code rdma-poller-<queue>} (a dedicated platform thread, whatever
 * {@code spring.threads.virtual.enabled} says), and its lifecycle. The thread runs a poll
 * loop that hands each completion, or each batch, to a dispatcher, which calls the
 * listener (see the package documentation for the way of a completion).
 *
 * <p>
 * Created by a {@code RdmaListenerContainerFactory}; until {@link #start()} its
 * {@link #getSettings() settings}, error handler and metrics may be changed (that is what
 * a {@code RdmaListenerContainerCustomizer} does). Start reads them once.
 * {@link #signalStop()} and {@link #awaitStop(long)} may be called from any thread.
 */
public class CompletionQueueListenerContainer {

	private final String queueName;

	private final CompletionQueue queue;

	private final PollerSettings settings;

	private final CompletionEventRouter router;

	private final Waker waker = new Waker();

	private @Nullable String listenerId;

	private @Nullable ListenerInvoker invoker;

	private boolean batchListener;

	private @Nullable RdmaCompletionErrorHandler errorHandler;

	private @Nullable String errorHandlerName;

	private PollerMetrics metrics = PollerMetrics.NONE;

	private @Nullable PollLoop loop;

	/** The mode the running loop uses, fixed at start. */
	private volatile @Nullable PollingMode startedMode;

	private volatile @Nullable Thread thread;

	/**
	 * @param queueName the queue's name (its bean name): names the thread and appears in
	 * every message
	 * @param queue the queue to poll; its channel, if any, is the one the poller waits on
	 * @param settings the poller's settings, owned by this container from now on
	 * @param router the wakers of the pollers that may share the queue's channel; this
	 * container's joins them
	 */
	public CompletionQueueListenerContainer(String queueName, CompletionQueue queue, PollerSettings settings,
			CompletionEventRouter router) {
		this.queueName = Objects.requireNonNull(queueName, "queueName");
		this.queue = Objects.requireNonNull(queue, "queue");
		this.settings = Objects.requireNonNull(settings, "settings");
		this.router = Objects.requireNonNull(router, "router");
		router.register(queue, waker);
	}

	// ------------------------------------------------------------------ set-up (before
	// start)

	/**
	 * The listener the completions go to.
	 * @param id how messages name the listener
	 * @param invoker the bound method: called with a {@code WorkCompletion}, or with a
	 * {@code CompletionBatch} when {@code batch} is true
	 * @param batch whether the listener takes one batch per poll
	 */
	public synchronized void setupListener(String id, ListenerInvoker invoker, boolean batch) {
		this.listenerId = Objects.requireNonNull(id, "id");
		this.invoker = Objects.requireNonNull(invoker, "invoker");
		this.batchListener = batch;
	}

	/**
	 * The handler of failed completions (instead of the listener), and the name messages
	 * give it; null for none.
	 */
	public synchronized void setErrorHandler(@Nullable String name, @Nullable RdmaCompletionErrorHandler errorHandler) {
		this.errorHandlerName = name;
		this.errorHandler = errorHandler;
	}

	/**
	 * Where the poller reports each batch; {@link PollerMetrics#NONE} (the default)
	 * reports nothing.
	 */
	public synchronized void setMetrics(PollerMetrics metrics) {
		this.metrics = Objects.requireNonNull(metrics, "metrics");
	}

	/** The poller's settings: changes take effect if made before {@link #start()}. */
	public PollerSettings getSettings() {
		return settings;
	}

	public synchronized PollerMetrics getMetrics() {
		return metrics;
	}

	public synchronized @Nullable RdmaCompletionErrorHandler getErrorHandler() {
		return errorHandler;
	}

	/** How messages name the listener, null before {@link #setupListener}. */
	public synchronized @Nullable String getListenerId() {
		return listenerId;
	}

	public synchronized boolean isBatchListener() {
		return batchListener;
	}

	// ------------------------------------------------------------------ lifecycle

	/**
	 * Starts the poller thread (once; later calls do nothing).
	 * @throws IllegalStateException when no listener was set up
	 * @throws IllegalArgumentException when the settings do not fit the queue (a mode
	 * that waits, on a queue without a channel; a batch size or ack batch below 1; a
	 * negative spin)
	 */
	public synchronized void start() {
		if (thread != null) {
			return;
		}
		ListenerInvoker listener = invoker;
		String id = listenerId;
		if (listener == null || id == null) {
			throw new IllegalStateException("no listener set up for queue '" + queueName + "'");
		}
		PollingMode mode = mode();
		startedMode = mode;
		// adaptive and backoff spin for `spin` after the last delivery: they need its
		// time
		boolean clocked = metrics != PollerMetrics.NONE || mode == PollingMode.ADAPTIVE || mode == PollingMode.BACKOFF;
		CompletionDispatcher dispatcher = new CompletionDispatcher(queueName, id, listener, errorHandler,
				errorHandlerName, metrics, clocked);
		PollLoop created = new PollLoop(queueName, queue, mode, settings.copy(), batchListener, dispatcher, metrics,
				router, waker);
		loop = created;
		Thread started = Thread.ofPlatform().name("rdma-poller-" + queueName).daemon(false).unstarted(created);
		thread = started;
		started.start();
	}

	/** Asks the loop to stop after the batch in flight and wakes it. */
	public void signalStop() {
		PollLoop l;
		synchronized (this) {
			l = loop;
		}
		if (l != null) {
			l.stop();
		}
		waker.wake();
		Thread t = thread;
		if (t != null) {
			LockSupport.unpark(t); // a backoff poller may be sleeping
		}
	}

	/**
	 * Waits until the thread has ended, at most until {@code deadlineNanos}
	 * ({@link System#nanoTime()}). Once it has ended (or when it never started) the
	 * container's waker is closed.
	 * @return true when the thread ended (or never started)
	 */
	public boolean awaitStop(long deadlineNanos) {
		Thread t = thread;
		if (t != null) {
			try {
				long left = deadlineNanos - System.nanoTime();
				if (left > 0) {
					t.join(Duration.ofNanos(left));
				}
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
			if (t.isAlive()) {
				return false;
			}
		}
		router.unregister(queue, waker);
		waker.close();
		return true;
	}

	/** Stops the poller: {@link #signalStop()} and {@link #awaitStop} with a timeout. */
	public boolean stop(Duration timeout) {
		signalStop();
		return awaitStop(System.nanoTime() + timeout.toNanos());
	}

	/** The queue's name. */
	public String queue() {
		return queueName;
	}

	public CompletionQueue completionQueue() {
		return queue;
	}

	/**
	 * The polling mode the poller uses: the one it started with; before start, its
	 * settings' mode, else event with a channel and backoff without.
	 */
	public PollingMode mode() {
		PollingMode started = startedMode;
		return started != null ? started : PollingMode.resolve(settings.getMode(), queue.channel() != null);
	}

	/** The poller thread, null before start. */
	public @Nullable Thread thread() {
		return thread;
	}

	/** Whether the poller thread is alive. */
	public boolean isRunning() {
		Thread t = thread;
		return t != null && t.isAlive();
	}

	@Override
	public String toString() {
		return "CompletionQueueListenerContainer[queue=" + queueName + ", listener=" + listenerId + ", " + settings
				+ "]";
	}

}
