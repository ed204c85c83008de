package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Waker;

/**
 * Runs the listener of one completion queue, on one of two kinds of poller thread (both
 * platform threads, whatever {@code spring.threads.virtual.enabled} says):
 * <ul>
 * <li>a <b>dedicated</b> poller, {@code rdma-poller-<queue>}, owned by this container and
 * running a {@link PollLoop} for this queue alone (no {@link #setPollerGroup poller
 * group});</li>
 * <li>a thread of a {@link PollerGroup}, {@code rdma-poller-<group>-<n>}, which the queue
 * joins on {@link #start()} and leaves on {@link #signalStop()}, sharing it with the
 * group's other queues ({@link GroupPollLoop}).</li>
 * </ul>
 * Either way the poll loop hands each completion, or each batch, to this queue's
 * dispatcher, which calls the listener (see the package documentation for the way of a
 * completion); the listener's thread is the poller's thread.
 *
 * <p>
 * Created by a {@code RdmaListenerContainerFactory}; until {@link #start()} its
 * {@link #getSettings() settings}, error handler and metrics may be changed (that is what
 * a {@code RdmaListenerContainerCustomizer} does). Start reads them once.
 * {@link #signalStop()} and {@link #awaitStop(long)} may be called from any thread.
 *
 * <p>
 * <b>Stopped from its own poller thread</b> (a listener that closes the application
 * context, as spring-kafka's container stopped from its consumer thread): the thread
 * cannot wait for itself, so {@link #awaitStop(long)} returns false at once instead of
 * waiting for the shutdown timeout ({@link #isPolledByCurrentThread()} tells the caller
 * why), and the poller thread finishes the stop itself once the listener has returned: it
 * leaves its loop (or its group thread), acks its events, closes what the shutdown handed
 * to {@link PollerThreads#closeWhenPollEnds} (the queue, its channel, its device, which
 * cannot be destroyed from inside their own poll) and frees the container's waker.
 */
public class CompletionQueueListenerContainer {

	private final String queueName;

	private final CompletionQueue queue;

	private volatile PollerSettings settings;

	private final CompletionEventRouter router;

	/**
	 * The dedicated poller's waker, made when it starts (a queue of a group has none).
	 */
	private @Nullable Waker waker;

	/** How the router wakes this queue's poller; replaced when the poller starts. */
	private Runnable wakerTarget = () -> {
	};

	private @Nullable PollerGroup group;

	/** The queue on its group thread, once started in a group. */
	private volatile @Nullable GroupMember member;

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

	/** Set once the end of the stop (router, waker, events) has been done. */
	private final AtomicBoolean finished = new AtomicBoolean();

	/** Set by {@link #signalStop()}, cleared when the poller starts again. */
	private volatile boolean stopSignalled;

	/**
	 * @param queueName the queue's name (its bean name): names the thread and appears in
	 * every message
	 * @param queue the queue to poll; its channel, if any, is the one the poller waits on
	 * @param settings the poller's settings (until a customizer gives it others)
	 * @param router the wakers of the pollers that may share the queue's channel; this
	 * container's joins them
	 */
	public CompletionQueueListenerContainer(String queueName, CompletionQueue queue, PollerSettings settings,
			CompletionEventRouter router) {
		this.queueName = Objects.requireNonNull(queueName, "queueName");
		this.queue = Objects.requireNonNull(queue, "queue");
		this.settings = Objects.requireNonNull(settings, "settings");
		this.router = Objects.requireNonNull(router, "router");
		router.register(queue, wakerTarget);
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
	 * The handler of failed completions (instead of a single-completion listener; a batch
	 * listener still gets them in its batch, after the handler), and the name messages
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

	/**
	 * The poller group whose threads poll this queue, or null (the default) for a
	 * dedicated poller thread. The group's mode and spin replace those of the
	 * {@link #getSettings() settings}; batch size and ack batch stay the queue's own.
	 * @throws IllegalStateException while the poller runs (set it before
	 * {@link #start()}, or once a stop has ended)
	 */
	public synchronized void setPollerGroup(@Nullable PollerGroup group) {
		if ((thread != null || member != null) && !(stopSignalled && finished.get())) {
			// the stop leaves the group the queue joined, which it reads from here
			throw new IllegalStateException(
					"the poller of queue '" + queueName + "' is running: stop it before changing its poller group");
		}
		this.group = group;
	}

	public synchronized @Nullable PollerGroup getPollerGroup() {
		return group;
	}

	/** The poller's settings. */
	public PollerSettings getSettings() {
		return settings;
	}

	/**
	 * Replaces the poller's settings (a customizer:
	 * {@code container.setSettings(container.getSettings().withBatchSize(128))}); takes
	 * effect if made before {@link #start()}.
	 */
	public void setSettings(PollerSettings settings) {
		this.settings = Objects.requireNonNull(settings, "settings");
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
	 * Starts the poller thread, or joins the poller group. While the poller runs, later
	 * calls do nothing. Once a stop has ended (the thread has ended, or the queue has
	 * left its group thread), a start runs a new poller with the same listener and
	 * settings: a context's {@code stop()} then {@code start()} (pause and resume) polls
	 * the queue again.
	 * @throws IllegalStateException when no listener was set up, or when a stop was asked
	 * for and has not ended yet (a listener call still running)
	 * @throws IllegalArgumentException when the settings do not fit the queue (a mode
	 * that waits, on a queue without a channel; a batch size or ack batch below 1; a
	 * negative spin)
	 */
	public synchronized void start() {
		if (thread != null || member != null) {
			if (!finished.get()) {
				if (!stopSignalled) {
					return; // running
				}
				throw new IllegalStateException("the poller of queue '" + queueName
						+ "' is still stopping (a listener call has not returned): start it again once it has stopped");
			}
			// the last poller has finished its stop, asked for or not (its thread ended
			// on an Error, or its group thread did and abandoned it): start afresh
			thread = null;
			member = null;
			loop = null;
			waker = null;
			startedMode = null;
		}
		stopSignalled = false;
		finished.set(false);
		ListenerInvoker listener = invoker;
		String id = listenerId;
		if (listener == null || id == null) {
			throw new IllegalStateException("no listener set up for queue '" + queueName + "'");
		}
		PollingMode mode = mode();
		PollerGroup g = group;
		if (g != null) {
			startInGroup(g, mode, id, listener);
			return;
		}
		startedMode = mode;
		// adaptive and backoff spin for `spin` after the last delivery: they need its
		// time
		boolean clocked = metrics != PollerMetrics.NONE || mode == PollingMode.ADAPTIVE || mode == PollingMode.BACKOFF;
		CompletionDispatcher dispatcher = new CompletionDispatcher(queueName, id, listener, errorHandler,
				errorHandlerName, metrics, clocked);
		Waker w = new Waker();
		PollLoop created;
		try {
			created = new PollLoop(queueName, queue, mode, settings, batchListener, dispatcher, metrics, router, w);
		}
		catch (RuntimeException ex) {
			w.close();
			throw ex;
		}
		waker = w;
		router.unregister(queue, wakerTarget);
		wakerTarget = w::wake;
		router.register(queue, wakerTarget);
		loop = created;
		Runnable body = () -> {
			try {
				created.run();
			}
			finally {
				finishStop(); // also when stopped from this thread, which did not wait
			}
		};
		Thread started = Thread.ofPlatform().name("rdma-poller-" + queueName).daemon(false).unstarted(body);
		thread = started;
		started.start();
	}

	private void startInGroup(PollerGroup g, PollingMode mode, String id, ListenerInvoker listener) {
		if (mode != PollingMode.BUSY && queue.channel() == null) {
			throw new IllegalArgumentException("queue " + queueName + " has no channel for " + mode
					+ " polling (the mode of poller group '" + g.name() + "')");
		}
		PollerSettings s = settings;
		if (s.batchSize() < 1 || s.ackBatch() < 1) {
			throw new IllegalArgumentException(
					"queue " + queueName + ": batch size and ack batch must be at least 1 (" + s + ")");
		}
		// the group thread reads the clock once per turn for adaptive mode itself
		CompletionDispatcher dispatcher = new CompletionDispatcher(queueName, id, listener, errorHandler,
				errorHandlerName, metrics, metrics != PollerMetrics.NONE);
		GroupMember m = new GroupMember(queueName, queue, dispatcher, metrics, batchListener, s.batchSize(),
				s.ackBatch());
		router.unregister(queue, wakerTarget);
		wakerTarget = m.routeTarget;
		router.register(queue, wakerTarget);
		m.afterLeave = () -> finishLeave(m);
		// set before the join: the group thread may deliver the first completion at once,
		// and a listener that stops the container then must find its member
		member = m;
		try {
			g.join(m);
		}
		catch (RuntimeException ex) {
			member = null;
			router.unregister(queue, wakerTarget);
			throw ex;
		}
		startedMode = mode;
	}

	/** Asks the loop to stop after the batch in flight and wakes it. */
	public void signalStop() {
		stopSignalled = true;
		PollLoop l;
		GroupMember m;
		PollerGroup g;
		synchronized (this) {
			l = loop;
			m = member;
			g = group;
		}
		if (m != null && g != null) {
			g.leave(m); // once: leave() forgets the member's thread
			return;
		}
		if (l != null) {
			l.stop();
		}
		Waker w;
		synchronized (this) {
			w = waker;
		}
		if (w != null) {
			w.wake();
		}
		Thread t = thread;
		if (t != null) {
			LockSupport.unpark(t); // a backoff poller, or one pausing after a failed
									// poll, may be sleeping
		}
	}

	/**
	 * Whether the current thread is this queue's poller thread (its dedicated thread, or
	 * the group thread that polls it): then the poller cannot stop before the current
	 * call returns to it, and {@link #awaitStop(long)} does not wait.
	 */
	public boolean isPolledByCurrentThread() {
		Thread current = Thread.currentThread();
		GroupMember m = member;
		if (m != null) {
			return m.poller() == current;
		}
		return thread == current;
	}

	/**
	 * Waits until the thread has ended, at most until {@code deadlineNanos}
	 * ({@link System#nanoTime()}). Once it has ended (or when it never started) the
	 * container's waker is closed. Called on the poller thread itself
	 * ({@link #isPolledByCurrentThread()}), it does not wait and returns false: the
	 * thread stops, and finishes the stop, once the current listener call has returned.
	 * @return true when the thread ended (or never started)
	 */
	public boolean awaitStop(long deadlineNanos) {
		if (isPolledByCurrentThread()) {
			return false;
		}
		GroupMember m = member;
		if (m != null) {
			if (!m.awaitLeft(deadlineNanos)) {
				return false;
			}
			finishLeave(m);
			return true;
		}
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
		finishStop();
		return true;
	}

	/**
	 * The end of a group queue's stop, once it has left its thread: run by the first of
	 * the group thread and {@link #awaitStop}.
	 */
	private void finishLeave(GroupMember m) {
		if (!finished.compareAndSet(false, true)) {
			return;
		}
		router.unregister(queue, m.routeTarget);
		// an event another thread of the group got for this queue between its leave
		// and the unregister went to a member that is gone: ack it here (later ones
		// are acked by the thread that gets them, CompletionEventRouter.wake)
		try {
			queue.ackEvents();
		}
		catch (IllegalStateException closed) {
			// closed meanwhile: closing acked every event
		}
	}

	/**
	 * The end of a dedicated poller's stop (or of a container that never started), once
	 * its thread has ended: run by the first of the thread itself and {@link #awaitStop}.
	 */
	private void finishStop() {
		Runnable target;
		Waker w;
		// finished and the waker in one step: once finished, start() may run a new
		// poller with a new waker at once, which this must neither unregister nor close
		synchronized (this) {
			if (!finished.compareAndSet(false, true)) {
				return;
			}
			target = wakerTarget;
			w = waker;
		}
		router.unregister(queue, target);
		if (w != null) {
			w.close();
		}
	}

	/** Stops the poller: {@link #signalStop()} and {@link #awaitStop} with a timeout. */
	public boolean stop(Duration timeout) {
		signalStop();
		return awaitStop(Deadlines.after(timeout));
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
		if (started != null) {
			return started;
		}
		PollerGroup g;
		synchronized (this) {
			g = group;
		}
		return g != null ? g.mode() : PollingMode.resolve(settings.mode(), queue.channel() != null);
	}

	/**
	 * The poller thread: the dedicated one, or the group thread the queue was assigned
	 * to; null before start (and, in a group, once the queue has left its thread).
	 */
	public @Nullable Thread thread() {
		GroupMember m = member;
		if (m != null) {
			GroupPollLoop l = m.loop;
			return l == null ? null : l.thread();
		}
		return thread;
	}

	/**
	 * Whether the queue is being polled: its dedicated thread is alive, or it is on a
	 * live group thread.
	 */
	public boolean isRunning() {
		GroupMember m = member;
		if (m != null) {
			Thread t = thread();
			return m.left.getCount() > 0 && t != null && t.isAlive();
		}
		Thread t = thread;
		return t != null && t.isAlive();
	}

	@Override
	public String toString() {
		PollerGroup g = group;
		return "CompletionQueueListenerContainer[queue=" + queueName + ", listener=" + listenerId + ", "
				+ (g == null ? "dedicated poller" : "poller group " + g.name()) + ", " + settings + "]";
	}

}
