package dev.rdma.spring.listener;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;

/**
 * A group of poller threads ({@code rdma-poller-<group>-<n>}) shared by many completion
 * queues: each queue's listener container joins the group when it starts, is assigned to
 * one thread ({@link PollerAssignment}) and stays on it until it stops. A thread is
 * started when its first queue arrives and ends when its last one leaves, so the group
 * never has more than {@link PollerGroupSettings#threads()} threads, however many queues
 * it polls. Each thread runs a {@link GroupPollLoop}.
 *
 * <p>
 * Thread-safe: joining and leaving are serialised by the group's lock; the threads
 * themselves take the queues in and out.
 */
public final class PollerGroup {

	/**
	 * The group of queues that name no poller and can wait on events
	 * ({@code rdma.pollers.default}, one thread in event mode unless configured).
	 */
	public static final String DEFAULT = "default";

	/** The poller name that asks for a dedicated thread per queue. */
	public static final String DEDICATED = "dedicated";

	private static final Log logger = LogFactory.getLog(PollerGroup.class);

	private final String name;

	private final PollerGroupSettings settings;

	private final CompletionEventRouter router;

	private final @Nullable GroupPollLoop[] loops;

	private final int[] loads;

	/** Epoll tokens handed out per thread (never reused while the thread lives). */
	private final int[] nextToken;

	/** The thread and token of each channel that has queues in the group. */
	private final Map<CompletionChannel, ChannelEntry> channels = new IdentityHashMap<>();

	/**
	 * @param name the group's name: names its threads
	 * @param settings its settings
	 * @param router the wakers of all pollers, for queues that share a channel with
	 * queues of other pollers
	 */
	public PollerGroup(String name, PollerGroupSettings settings, CompletionEventRouter router) {
		this.name = Objects.requireNonNull(name, "name");
		this.settings = Objects.requireNonNull(settings, "settings");
		this.router = Objects.requireNonNull(router, "router");
		int threads = this.settings.threads();
		if (this.settings.mode() == PollingMode.BACKOFF) {
			throw new IllegalArgumentException("poller group '" + name
					+ "': backoff is the mode of a dedicated poller; a group runs in event, busy or adaptive mode");
		}
		if (threads < 1 || this.settings.batchBudget() < 1 || this.settings.spin().isNegative()) {
			throw new IllegalArgumentException("poller group '" + name
					+ "': threads and batch budget must be at least 1 and spin must not be negative (" + settings
					+ ")");
		}
		this.loops = new GroupPollLoop[threads];
		this.loads = new int[threads];
		this.nextToken = new int[threads];
	}

	public String name() {
		return name;
	}

	/** The group's settings. */
	public PollerGroupSettings settings() {
		return settings;
	}

	PollingMode mode() {
		return settings.mode();
	}

	CompletionEventRouter router() {
		return router;
	}

	/** The group's live threads (at most {@code threads}). */
	public synchronized List<Thread> threads() {
		List<Thread> threads = new ArrayList<>();
		for (GroupPollLoop loop : loops) {
			Thread t = loop == null ? null : loop.thread();
			if (t != null && t.isAlive()) {
				threads.add(t);
			}
		}
		return threads;
	}

	/** Queues per thread now. */
	public synchronized int[] loads() {
		return loads.clone();
	}

	/**
	 * Assigns {@code member} to a thread (starting it if it is not running) and hands it
	 * over.
	 * @throws dev.rdma.verbs.VerbsException when the thread's epoll set refuses the
	 * queue's channel
	 */
	synchronized void join(GroupMember member) {
		CompletionChannel channel = member.queue.channel();
		ChannelEntry entry = channel == null ? null : channels.get(channel);
		int t = PollerAssignment.choose(loads, entry == null ? -1 : entry.thread, member.queue.compVector(),
				member.queue.context().numCompVectors());
		GroupPollLoop loop = loops[t];
		boolean created = loop == null;
		if (loop == null) {
			loop = new GroupPollLoop(this, t, settings, router);
			nextToken[t] = 0;
		}
		try {
			if (channel != null && loop.waitsOnEvents()) {
				if (entry == null) {
					int token = nextToken[t]++;
					loop.addChannel(channel, token);
					entry = new ChannelEntry(t, token);
					channels.put(channel, entry);
				}
				entry.queues++;
				member.token = entry.token;
			}
		}
		catch (RuntimeException ex) {
			if (created) {
				loop.discard();
			}
			throw ex;
		}
		if (created) {
			loops[t] = loop;
		}
		loads[t]++;
		member.loop = loop;
		member.assigned = loop;
		loop.join(member);
		if (created) {
			loop.start();
		}
	}

	/** Takes {@code member} from its thread; its latch opens once it has left. */
	synchronized void leave(GroupMember member) {
		GroupPollLoop loop = member.loop;
		if (loop == null) {
			return;
		}
		member.loop = null;
		if (loops[loop.index()] == loop) {
			loads[loop.index()]--;
		}
		CompletionChannel channel = member.queue.channel();
		ChannelEntry entry = channel == null ? null : channels.get(channel);
		if (channel != null && entry != null && member.token >= 0 && --entry.queues == 0) {
			channels.remove(channel);
			try {
				loop.removeChannel(channel);
			}
			catch (RuntimeException ex) {
				logger.warn("Removing " + channel + " from '" + loop.threadName() + "' failed", ex);
			}
		}
		loop.leaveLater(member);
	}

	/**
	 * A thread without queues asks to end: yes, unless a queue is on its way to it.
	 */
	synchronized boolean retire(GroupPollLoop loop) {
		if (loop.hasJoining()) {
			return false;
		}
		retired(loop);
		return true;
	}

	/** A thread ended (retired, or failed): forget it and its channels. */
	synchronized void retired(GroupPollLoop loop) {
		int t = loop.index();
		if (loops[t] == loop) {
			loops[t] = null;
			loads[t] = 0;
			channels.values().removeIf(e -> e.thread == t);
		}
	}

	@Override
	public String toString() {
		return "PollerGroup[" + name + ", " + settings + "]";
	}

	private static final class ChannelEntry {

		final int thread;

		final int token;

		int queues;

		ChannelEntry(int thread, int token) {
			this.thread = thread;
			this.token = token;
		}

	}

}
