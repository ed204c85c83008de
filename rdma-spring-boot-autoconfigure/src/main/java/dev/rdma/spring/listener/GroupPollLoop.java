package dev.rdma.spring.listener;

import java.util.ArrayDeque;
import java.util.BitSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.CpuAffinity;
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
 *
 * <p>
 * Not the loop, so elsewhere: the thread's queues and their hand-over between threads
 * ({@link GroupMembers}), and each queue's bookkeeping (events counted and acked, the
 * pause after a failed poll, lost events, leaving: {@link GroupMember}).
 */
final class GroupPollLoop implements Runnable {

	private static final Log logger = LogFactory.getLog(GroupPollLoop.class);

	/** The longest a wait lasts; wake-ups normally end it much sooner. */
	private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

	/**
	 * How often the armed queues are re-polled for completions whose event never came.
	 */
	static final long SWEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

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

	/** The thread's queues, and those handed to it or taken from it. */
	private final GroupMembers members = new GroupMembers();

	/** Set (before a wake-up) when another poller routed an event to a queue of ours. */
	private volatile boolean eventsRouted;

	// Scratch of the poller thread.
	private final ArrayDeque<GroupMember> ready = new ArrayDeque<>();

	/** Ready queues that pause after a failed poll, and when the first pause ends. */
	private int pausedReady;

	private long pausedUntil;

	/** When the armed queues are re-polled next. */
	private long nextSweepNanos;

	/** When the last turn that found work ended: adaptive mode's spin counts from it. */
	private long lastWork;

	/** The last turn spun (adaptive mode): every queue must be armed before a wait. */
	private boolean wasSpinning;

	private volatile @Nullable Thread thread;

	/** The CPUs the thread pins itself to when it starts, null: not pinned. */
	private final @Nullable BitSet cpus;

	GroupPollLoop(PollerGroup group, int index, PollerGroupSettings settings, CompletionEventRouter router) {
		this.group = group;
		this.index = index;
		this.threadName = "rdma-poller-" + group.name() + "-" + index;
		this.mode = settings.mode();
		this.spinNanos = Deadlines.nanos(settings.spin());
		this.budget = settings.batchBudget();
		this.cpus = settings.cpuSet();
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
		lastWork = System.nanoTime();
		nextSweepNanos = lastWork + SWEEP_NANOS;
		PollerThreads.enter();
		try {
			pin();
			while (turn()) {
				// one turn after the other until the thread retires
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
	 * One turn of the loop, steps 1 to 7 (each {@code return true} is the loop's next
	 * turn); false when the thread retires. A method of its own, not the body of
	 * {@link #run()}'s loop: the JIT compiles it as a method once it has been called
	 * often enough, where the loop of a method that is entered once would only be
	 * compiled on-stack, and with events (a few turns per message) stayed at C1 with
	 * profiling.
	 */
	private boolean turn() {
		// 1. membership: queues join or leave; a thread without queues retires
		if (members.changed() && !applyMembership()) {
			return false;
		}
		// what a listener's shutdown on this thread could not close inside the poll
		// (its queue is left by now: the shutdown took it from this thread)
		PollerThreads.closeDeferred();
		// 2. drain: every queue while spinning, else the ready ones; each up to its
		// budget
		boolean spinning = mode == PollingMode.BUSY
				|| (mode == PollingMode.ADAPTIVE && System.nanoTime() - lastWork < spinNanos);
		int work;
		if (spinning) {
			work = drainAll();
			wasSpinning = true;
		}
		else {
			if (wasSpinning) {
				// adaptive mode stops spinning: every queue must be armed before the
				// wait
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
			return true;
		}
		// 4. wait on every channel and the waker; only look while queues are ready
		// (unless all of them pause after a failed poll)
		int readable = awaitEvents(waitNanos());
		// 5. get the events: each names its CQ, which is counted, acked in batches and
		// made ready
		for (int i = 0; i < readable; i++) {
			takeEvents(epoll().readyToken(i));
		}
		// 6. events other pollers took for our queues
		if (eventsRouted) {
			collectRoutedEvents();
		}
		// 7. re-poll the armed queues: an event the provider lost delays a completion
		// by at most SWEEP_NANOS instead of for ever
		if (System.nanoTime() - nextSweepNanos >= 0) {
			sweepArmed();
			nextSweepNanos = System.nanoTime() + SWEEP_NANOS;
		}
		return true;
	}

	/**
	 * Adds the joining queues and removes the leaving ones; false when the thread has no
	 * queue left and the group retired it.
	 */
	private boolean applyMembership() {
		GroupMember joined;
		while ((joined = members.nextJoining()) != null) {
			members.add(joined); // its buffer is made here
			makeReady(joined); // drains what is there and arms it
		}
		GroupMember left;
		while ((left = members.nextLeaving()) != null) {
			if (members.remove(left)) {
				ready.remove(left);
			}
			left.leave(); // every got event acked, its container told
		}
		return !members.isEmpty() || !group.retire(this);
	}

	/** Drains every queue (spinning); returns the completions. */
	private int drainAll() {
		int work = 0;
		for (int i = 0; i < members.size(); i++) {
			GroupMember m = members.get(i);
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
			GroupMember m = ready.poll();
			m.queued = false;
			if (!m.running) {
				continue; // closed under its poller: nothing to poll, ever
			}
			if (m.paused()) {
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
				m.pollFailed(ex, threadName);
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

	private void makePausedReady(GroupMember m) {
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
	private int drain(GroupMember m) {
		int total = 0;
		if (!m.running || m.paused()) {
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
			m.pollFailed(ex, threadName);
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
			if (members.changed() || eventsRouted) {
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
		CompletionChannel channel = members.channel(token);
		if (channel == null) {
			return; // joined after the wait: the membership step adds it, the fd stays
					// readable
		}
		for (int i = Math.max(1, members.queuesOnChannel(token)); i > 0; i--) {
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
			GroupMember m = members.byQueue(fired);
			if (m != null) {
				m.countAndAck(false);
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
			GroupMember m = members.get(i);
			if (m.eventsAtSweep >= 0) {
				if (m.eventsSeen == m.eventsAtSweep) {
					m.missedEvent(threadName);
				}
				m.eventsAtSweep = -1;
			}
			if (m.queued || m.routed || !m.running || m.paused()) {
				continue;
			}
			if (drain(m) > 0) {
				m.eventsAtSweep = m.eventsSeen;
				makeReady(m);
			}
		}
	}

	private void collectRoutedEvents() {
		eventsRouted = false;
		for (int i = 0; i < members.size(); i++) {
			GroupMember m = members.get(i);
			if (m.routed) {
				m.routed = false;
				m.countAndAck(false);
				makeReady(m);
			}
		}
	}

	// ------------------------------------------------------------------ helpers

	private void makeReady(GroupMember m) {
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

	private void shutDown() {
		// forgotten by the group first: a queue it hands over from now on goes to another
		// thread, and one handed over before is in joining, which leaveAll abandons
		group.retired(this);
		members.leaveAll();
		ready.clear();
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
	void join(GroupMember m) {
		members.handOver(m);
		wakeUp();
	}

	/** Takes {@code m} from this thread; its latch opens once its events are acked. */
	void leaveLater(GroupMember m) {
		members.takeAway(m);
		wakeUp();
	}

	/** An event of a queue of this thread was taken by another poller (its router). */
	void eventRouted() {
		eventsRouted = true;
		wakeUp();
	}

	/** Whether queues are waiting to join (the group's retire check, under its lock). */
	boolean hasJoining() {
		return members.hasJoining();
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

	/**
	 * Pins this thread to {@link #cpus} (a list the starter checked against the process's
	 * allowed CPUs); a refusal is logged and the thread runs unpinned.
	 */
	private void pin() {
		if (cpus == null) {
			return;
		}
		try {
			CpuAffinity.pinCurrentThread(cpus);
		}
		catch (RuntimeException ex) {
			logger.warn("Poller thread " + threadName + " of group '" + group.name() + "' runs unpinned: "
					+ ex.getMessage());
		}
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

}
