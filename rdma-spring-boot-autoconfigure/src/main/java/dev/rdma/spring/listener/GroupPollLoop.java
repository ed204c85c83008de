package dev.rdma.spring.listener;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Epoll;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * The poll loop of one thread of a {@link PollerGroup} ({@code rdma-poller-<group>-<n>}):
 * many completion queues, their channels and one wake-up fd, waited on with one
 * {@code epoll_wait}. What happens to each completion is each queue's
 * {@link CompletionDispatcher}'s business, exactly as in the dedicated {@link PollLoop}.
 *
 * <p>
 * The loop ({@link #run()}), in order:
 * <ol>
 * <li><b>membership</b>: queues handed to this thread (or taken from it) by other threads
 * join (their buffer is made here) or leave (their events all acked, then their container
 * is told); a thread left with no queue retires;</li>
 * <li><b>drain</b>: while spinning (busy mode; adaptive mode for {@code spin} after the
 * last completion) every queue, else the <i>ready</i> queues (those whose event came, or
 * whose budget ran out last turn), in turn; each gets at most the batch budget, and one
 * that used it all stays ready for the next turn: a flooded queue cannot starve the
 * others;</li>
 * <li><b>arm</b>: a ready queue drained below its budget is armed
 * ({@code ibv_req_notify_cq}) and drained once more, so a completion that arrived before
 * the arm is never left waiting for an event that will not come; what that drain finds
 * keeps the queue ready;</li>
 * <li><b>wait</b> with one {@code epoll_wait} on every channel of the thread and the
 * thread's waker: a real wait only when no queue is ready (else just a look), announced
 * in {@link #nextWakeupNanos} so that other threads write the waker only when this thread
 * may be blocked (Netty's pattern: a wake-up while it is awake costs one atomic swap, and
 * none is lost: the thread re-checks for work after announcing);</li>
 * <li><b>get the events</b> ({@code ibv_get_cq_event}, non-blocking): per readable
 * channel, up to as many as the thread has queues on it; each names the CQ that fired,
 * which is counted, acked every ack-batch events, and made ready. An event of a queue of
 * another poller sharing the channel goes to it through the
 * {@link CompletionEventRouter};</li>
 * <li><b>routed events</b>: events other pollers took for this thread's queues are
 * counted and their queues made ready;</li>
 * <li><b>re-poll</b>: every {@link #SWEEP_NANOS}, each armed queue (drained empty,
 * waiting for its event) is polled once. A provider can lose an event (Soft-RoCE has been
 * seen to; docs/reliability.md): without this a completion whose event never came would
 * wait for the queue's next event, for ever in a request/response protocol. What the
 * re-poll finds is delivered and the queue made ready (drained and re-armed); when no
 * event for it has come by the next re-poll either, the event was lost: counted
 * ({@link PollerMetrics#missedEvent()}) and logged. Back to 1.</li>
 * </ol>
 * Busy and adaptive modes spin over all the thread's queues, not one. A queue whose poll
 * fails is retried after a pause without holding up the others. On exit every got event
 * is acked. Nothing is allocated per completion or per event.
 */
final class GroupPollLoop implements Runnable {

	private static final Log logger = LogFactory.getLog(GroupPollLoop.class);

	/** The longest a wait lasts; wake-ups normally end it much sooner. */
	private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

	/**
	 * How often the armed queues are re-polled for completions whose event never came.
	 */
	static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

	/** Pause of a queue after a failed poll (e.g. a CQ in the error state). */
	private static final long ERROR_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

	/** {@link #nextWakeupNanos} while the thread is not blocked. */
	private static final long AWAKE = -1;

	/** Most ready fds one epoll_wait reports; the rest stay ready for the next. */
	private static final int MAX_EVENTS = 256;

	private final PollerGroup group;

	private final int index;

	private final String threadName;

	private final PollingMode mode;

	private final long spinNanos;

	private final int budget;

	private final CompletionEventRouter router;

	private final Waker waker = new Waker();

	private final @Nullable Epoll epoll;

	/**
	 * When the thread's wait ends if nothing wakes it, or {@link #AWAKE}: other threads
	 * write the waker only when it is not AWAKE.
	 */
	private final AtomicLong nextWakeupNanos = new AtomicLong(AWAKE);

	private final ConcurrentLinkedQueue<Member> joining = new ConcurrentLinkedQueue<>();

	private final ConcurrentLinkedQueue<Member> leaving = new ConcurrentLinkedQueue<>();

	/** Set (before a wake-up) when joining or leaving has something. */
	private volatile boolean membershipChanged;

	/** Set (before a wake-up) when another poller routed an event to a queue of ours. */
	private volatile boolean eventsRouted;

	// Scratch of the poller thread.
	private final List<Member> members = new ArrayList<>();

	private final Map<CompletionQueue, Member> byQueue = new IdentityHashMap<>();

	/** Channels by epoll token (tokens are handed out by the group, never reused). */
	private @Nullable CompletionChannel[] channels = new CompletionChannel[8];

	/** Queues of this thread per channel token: how many events to get per readiness. */
	private int[] queuesOnChannel = new int[8];

	private final ArrayDeque<Member> ready = new ArrayDeque<>();

	/** Ready queues that pause after a failed poll, and when the first pause ends. */
	private int pausedReady;

	private long pausedUntil;

	/** When the armed queues are re-polled next. */
	private long nextSweepNanos;

	private volatile @Nullable Thread thread;

	GroupPollLoop(PollerGroup group, int index, PollerGroupSettings settings, CompletionEventRouter router) {
		this.group = group;
		this.index = index;
		this.threadName = "rdma-poller-" + group.name() + "-" + index;
		this.mode = settings.getMode();
		this.spinNanos = Deadlines.nanos(settings.getSpin());
		this.budget = settings.getBatchBudget();
		this.router = router;
		try {
			this.epoll = mode == PollingMode.BUSY ? null : new Epoll(waker, MAX_EVENTS);
		}
		catch (RuntimeException ex) {
			waker.close();
			throw ex;
		}
	}

	// ------------------------------------------------------------------ the loop

	@Override
	public void run() {
		long lastWork = System.nanoTime();
		nextSweepNanos = lastWork + SWEEP_NANOS;
		boolean wasSpinning = false;
		PollerThreads.enter();
		try {
			while (true) {
				// 1. membership: queues join or leave; a thread without queues retires
				if (membershipChanged && !applyMembership()) {
					return;
				}
				// what a listener's shutdown on this thread could not close inside the
				// poll (its queue is left by now: the shutdown took it from this thread)
				PollerThreads.closeDeferred();
				// 2. drain: every queue while spinning, else the ready ones; each up to
				// its budget
				boolean spinning = mode == PollingMode.BUSY
						|| (mode == PollingMode.ADAPTIVE && System.nanoTime() - lastWork < spinNanos);
				int work;
				if (spinning) {
					work = drainAll();
					wasSpinning = true;
				}
				else {
					if (wasSpinning) {
						// adaptive mode stops spinning: every queue must be armed before
						// the wait
						makeAllReady();
						wasSpinning = false;
					}
					// 3. arm what was drained below its budget, and drain it once more
					work = drainReadyAndArm();
				}
				if (work > 0) {
					lastWork = System.nanoTime();
				}
				if (spinning) {
					// events of armed queues wait in their channels until the spin ends
					if (work == 0) {
						Thread.onSpinWait();
					}
					continue;
				}
				// 4. wait on every channel and the waker; only look while queues are
				// ready (unless all of them pause after a failed poll)
				int readable = awaitEvents(waitNanos());
				// 5. get the events: each names its CQ, which is counted, acked in
				// batches and made ready
				for (int i = 0; i < readable; i++) {
					takeEvents(epoll().readyToken(i));
				}
				// 6. events other pollers took for our queues
				if (eventsRouted) {
					collectRoutedEvents();
				}
				// 7. re-poll the armed queues: an event the provider lost delays a
				// completion by at most SWEEP_NANOS instead of for ever
				if (System.nanoTime() - nextSweepNanos >= 0) {
					sweepArmed();
					nextSweepNanos = System.nanoTime() + SWEEP_NANOS;
				}
			}
		}
		catch (Throwable ex) {
			logger.error("Poller thread '" + threadName + "' failed; its queues are no longer polled", ex);
			throw ex;
		}
		finally {
			try {
				shutDown();
			}
			finally {
				PollerThreads.exit();
			}
		}
	}

	/**
	 * Adds the joining queues and removes the leaving ones; false when the thread has no
	 * queue left and the group retired it.
	 */
	private boolean applyMembership() {
		membershipChanged = false;
		Member joined;
		while ((joined = joining.poll()) != null) {
			joined.buffer = new WorkCompletionBuffer(joined.batchSize);
			joined.eventsSeen = joined.queue.eventsGot();
			joined.polledBy = Thread.currentThread();
			members.add(joined);
			byQueue.put(joined.queue, joined);
			if (joined.token >= 0) {
				channelJoined(joined.token, joined.queue.channel());
			}
			makeReady(joined); // drains what is there and arms it
		}
		Member left;
		while ((left = leaving.poll()) != null) {
			if (members.remove(left)) {
				byQueue.remove(left.queue);
				ready.remove(left);
				if (left.token >= 0) {
					queuesOnChannel[left.token]--;
				}
			}
			leave(left);
		}
		return !members.isEmpty() || !group.retire(this);
	}

	/** Drains every queue (spinning); returns the completions. */
	private int drainAll() {
		int work = 0;
		for (int i = 0; i < members.size(); i++) {
			Member m = members.get(i);
			work += drain(m);
		}
		return work;
	}

	/**
	 * Gives each queue that was ready at the start of the turn its budget; a queue that
	 * used it all, or whose drain after the arm found more, stays ready.
	 */
	private int drainReadyAndArm() {
		int work = 0;
		pausedReady = 0;
		pausedUntil = 0;
		for (int turn = ready.size(); turn > 0; turn--) {
			Member m = ready.poll();
			m.queued = false;
			if (!m.running) {
				continue; // closed under its poller: nothing to poll, ever
			}
			if (paused(m)) {
				makePausedReady(m); // still pausing after a failed poll
				continue;
			}
			int n = drain(m);
			work += n;
			if (m.pausedUntil != 0) {
				makePausedReady(m); // this poll failed
				continue;
			}
			if (n >= budget) {
				makeReady(m); // more is likely waiting: the next turn, after the others
				continue;
			}
			try {
				m.queue.requestNotify(false);
			}
			catch (RuntimeException ex) {
				pollFailed(m, ex);
				if (m.running) {
					makePausedReady(m);
				}
				continue;
			}
			int late = drain(m);
			work += late;
			if (m.pausedUntil != 0) {
				makePausedReady(m);
			}
			else if (late > 0) {
				makeReady(m); // armed, but drained again next turn (a double arm is
								// harmless)
			}
		}
		return work;
	}

	/** Whether {@code m} pauses after a failed poll; clears the pause once it is over. */
	private boolean paused(Member m) {
		if (m.pausedUntil == 0) {
			return false;
		}
		if (System.nanoTime() - m.pausedUntil < 0) {
			return true;
		}
		m.pausedUntil = 0;
		return false;
	}

	private void makePausedReady(Member m) {
		makeReady(m);
		pausedReady++;
		if (pausedUntil == 0 || m.pausedUntil - pausedUntil < 0) {
			pausedUntil = m.pausedUntil;
		}
	}

	/**
	 * How long to wait: only look while a queue is ready to be drained; when the only
	 * ready queues pause, until the first pause ends.
	 */
	private long waitNanos() {
		if (ready.isEmpty()) {
			return WAIT_NANOS;
		}
		if (pausedReady < ready.size()) {
			return 0;
		}
		return Math.max(1, Math.min(WAIT_NANOS, pausedUntil - System.nanoTime()));
	}

	/**
	 * Polls {@code m} until it is empty or its budget is used; returns the completions.
	 */
	private int drain(Member m) {
		int total = 0;
		if (!m.running || paused(m)) {
			return 0;
		}
		try {
			while (total < budget && m.running) {
				int n;
				WorkCompletionBuffer buffer = m.buffer;
				if (m.batchListener) {
					n = m.queue.poll(buffer); // up to batch-size completions ...
					m.dispatcher.deliverBatch(buffer, n); // ... then the listener once
				}
				else {
					m.dispatcher.startBatch();
					n = m.queue.poll(buffer, m.dispatcher); // the listener per completion
					m.dispatcher.endBatch(n);
				}
				total += n;
				if (n < m.batchSize) {
					break;
				}
			}
		}
		catch (RuntimeException ex) {
			pollFailed(m, ex);
		}
		return total;
	}

	/**
	 * One epoll_wait; the Netty handshake around it: announce the deadline, re-check for
	 * work, wait, become AWAKE again.
	 */
	private int awaitEvents(long timeoutNanos) {
		Epoll e = epoll();
		if (timeoutNanos == 0) {
			return e.await(0);
		}
		long timeout = timeoutNanos;
		nextWakeupNanos.set(System.nanoTime() + timeout);
		try {
			if (membershipChanged || eventsRouted) {
				return e.await(0); // work was announced before our deadline: no wait
			}
			return e.await(timeout);
		}
		finally {
			nextWakeupNanos.lazySet(AWAKE);
		}
	}

	/**
	 * Gets up to one event per queue of this thread on the channel of {@code token}.
	 */
	private void takeEvents(int token) {
		CompletionChannel channel = token < channels.length ? channels[token] : null;
		if (channel == null) {
			return; // joined after the wait: the membership step adds it, the fd stays
					// readable
		}
		for (int i = Math.max(1, queuesOnChannel[token]); i > 0; i--) {
			CompletionQueue fired;
			try {
				fired = channel.getEvent();
			}
			catch (RuntimeException ex) {
				logger.error("Getting a completion event on " + channel + " failed in '" + threadName + "'", ex);
				return;
			}
			if (fired == null) {
				return;
			}
			Member m = byQueue.get(fired);
			if (m != null) {
				countAndAck(m, false);
				makeReady(m);
			}
			else {
				router.wake(fired); // or acks it, when its queue left
			}
		}
	}

	/**
	 * Polls each armed queue once (not ready, running, not pausing). What it finds is
	 * delivered, and the queue is made ready so that the next turn drains and re-arms it;
	 * the events this thread has counted for it so far are noted, and a queue that had
	 * none by the next sweep (neither its own nor one routed from another poller) lost
	 * its event.
	 */
	private void sweepArmed() {
		for (int i = 0; i < members.size(); i++) {
			Member m = members.get(i);
			if (m.eventsAtSweep >= 0) {
				if (m.eventsSeen == m.eventsAtSweep) {
					missedEvent(m);
				}
				m.eventsAtSweep = -1;
			}
			if (m.queued || m.routed || !m.running || paused(m)) {
				continue;
			}
			if (drain(m) > 0) {
				m.eventsAtSweep = m.eventsSeen;
				makeReady(m);
			}
		}
	}

	private void missedEvent(Member m) {
		m.metrics.missedEvent();
		if (!m.missedEventLogged) {
			m.missedEventLogged = true;
			logger.warn("Queue '" + m.queueName + "' had completions whose completion event never came (the"
					+ " provider lost it); '" + threadName + "' found them by re-polling its armed queues every "
					+ TimeUnit.NANOSECONDS.toMillis(SWEEP_NANOS) + " ms. Further ones are counted in"
					+ " rdma.events.missed");
		}
	}

	private void collectRoutedEvents() {
		eventsRouted = false;
		for (int i = 0; i < members.size(); i++) {
			Member m = members.get(i);
			if (m.routed) {
				m.routed = false;
				countAndAck(m, false);
				makeReady(m);
			}
		}
	}

	// ------------------------------------------------------------------ helpers

	private void makeReady(Member m) {
		if (!m.queued) {
			m.queued = true;
			ready.add(m);
		}
	}

	private void makeAllReady() {
		for (int i = 0; i < members.size(); i++) {
			makeReady(members.get(i));
		}
	}

	private void countAndAck(Member m, boolean all) {
		try {
			long got = m.queue.eventsGot();
			if (got != m.eventsSeen) {
				m.metrics.events(got - m.eventsSeen);
				m.eventsSeen = got;
			}
			long unacked = m.queue.eventsUnacked();
			if (unacked > 0 && (all || unacked >= m.ackBatch)) {
				m.metrics.acks(m.queue.ackEvents());
			}
		}
		catch (IllegalStateException ex) {
			// the queue is already closed; closing acked every event
		}
	}

	private void pollFailed(Member m, RuntimeException ex) {
		m.metrics.pollError(ex);
		if (m.queue.isClosed()) {
			m.running = false;
			logger.warn("Queue '" + m.queueName + "' was closed while its poller ran; '" + threadName
					+ "' stops polling it");
			return;
		}
		if (!m.pollErrorLogged) {
			m.pollErrorLogged = true;
			logger.error("Polling queue '" + m.queueName + "' failed in '" + threadName + "' (async CQ errors so far: "
					+ m.queue.asyncErrors() + "); retrying every " + TimeUnit.NANOSECONDS.toMillis(ERROR_PAUSE_NANOS)
					+ " ms", ex);
		}
		long until = System.nanoTime() + ERROR_PAUSE_NANOS;
		m.pausedUntil = until == 0 ? 1 : until;
	}

	private void channelJoined(int token, @Nullable CompletionChannel channel) {
		if (token >= channels.length) {
			int size = Math.max(token + 1, channels.length * 2);
			channels = Arrays.copyOf(channels, size);
			queuesOnChannel = Arrays.copyOf(queuesOnChannel, size);
		}
		channels[token] = channel;
		queuesOnChannel[token]++;
	}

	/**
	 * A queue leaves: all its got events acked, its container told, its buffer freed.
	 */
	private void leave(Member m) {
		countAndAck(m, true);
		m.left.countDown();
		WorkCompletionBuffer buffer = m.buffer;
		if (buffer != null) {
			buffer.close();
			m.buffer = null;
		}
		runAfterLeave(m);
	}

	/** The container's end of the stop (it may not have been able to wait for it). */
	private static void runAfterLeave(Member m) {
		Runnable then = m.afterLeave;
		if (then != null) {
			then.run();
		}
	}

	private void shutDown() {
		for (Member m : members) {
			leave(m);
		}
		members.clear();
		byQueue.clear();
		ready.clear();
		// queues that joined but were never taken in (the thread failed)
		Member m;
		while ((m = joining.poll()) != null) {
			m.left.countDown();
			runAfterLeave(m);
		}
		while ((m = leaving.poll()) != null) {
			m.left.countDown();
			runAfterLeave(m);
		}
		group.retired(this);
		if (epoll != null) {
			epoll.close();
		}
		waker.close();
	}

	private Epoll epoll() {
		Epoll e = epoll;
		if (e == null) {
			throw new IllegalStateException("busy mode has no epoll");
		}
		return e;
	}

	// ------------------------------------------------------------------ other threads

	/**
	 * Wakes the thread if it may be blocked in its wait; a swap, no system call, while it
	 * is awake.
	 */
	void wakeUp() {
		if (nextWakeupNanos.getAndSet(AWAKE) != AWAKE) {
			waker.wake();
		}
	}

	/** Hands {@code m} to this thread (called by the group, under its lock). */
	void join(Member m) {
		joining.add(m);
		membershipChanged = true;
		wakeUp();
	}

	/** Takes {@code m} from this thread; its latch opens once its events are acked. */
	void leaveLater(Member m) {
		m.running = false;
		leaving.add(m);
		membershipChanged = true;
		wakeUp();
	}

	/** Whether queues are waiting to join (the group's retire check, under its lock). */
	boolean hasJoining() {
		return !joining.isEmpty();
	}

	void addChannel(CompletionChannel channel, int token) {
		epoll().add(channel, token);
	}

	void removeChannel(CompletionChannel channel) {
		epoll().remove(channel);
	}

	boolean waitsOnEvents() {
		return epoll != null;
	}

	/** Frees a loop that never started (its first queue could not join). */
	void discard() {
		if (epoll != null) {
			epoll.close();
		}
		waker.close();
	}

	void start() {
		Thread t = Thread.ofPlatform().name(threadName).daemon(false).unstarted(this);
		thread = t;
		t.start();
	}

	@Nullable Thread thread() {
		return thread;
	}

	int index() {
		return index;
	}

	String threadName() {
		return threadName;
	}

	/**
	 * One queue of a group thread: what the loop needs to poll it, and its state there.
	 */
	static final class Member {

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
		 * {@link #eventsSeen} when a sweep last found completions of the armed queue, -1
		 * if none.
		 */
		long eventsAtSweep = -1;

		boolean missedEventLogged;

		Member(String queueName, CompletionQueue queue, CompletionDispatcher dispatcher, PollerMetrics metrics,
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
				l.eventsRouted = true;
				l.wakeUp();
			}
		}

	}

}
