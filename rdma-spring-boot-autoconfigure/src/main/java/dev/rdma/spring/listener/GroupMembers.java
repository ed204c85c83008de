package dev.rdma.spring.listener;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;

/**
 * The queues of one {@link GroupPollLoop} thread and their hand-over: other threads (the
 * {@link PollerGroup}, under its lock) hand queues to the thread or take them from it
 * through two concurrent queues and a flag; the thread applies the changes at the start
 * of its turn and keeps its members, the member of each CQ (the CQ an event names), and
 * its channels by epoll token with the number of its queues on each (how many events to
 * get per readiness).
 */
final class GroupMembers {

	private final ConcurrentLinkedQueue<GroupMember> joining = new ConcurrentLinkedQueue<>();

	private final ConcurrentLinkedQueue<GroupMember> leaving = new ConcurrentLinkedQueue<>();

	/** Set (before a wake-up) when joining or leaving has something. */
	private volatile boolean changed;

	// Scratch of the poller thread.
	private final List<GroupMember> members = new ArrayList<>();

	private final Map<CompletionQueue, GroupMember> byQueue = new IdentityHashMap<>();

	/** Channels by epoll token (tokens are handed out by the group, never reused). */
	private @Nullable CompletionChannel[] channels = new CompletionChannel[8];

	/** Queues of this thread per channel token: how many events to get per readiness. */
	private int[] queuesOnChannel = new int[8];

	// ------------------------------------------------------------------ other threads

	/** Hands {@code m} to the thread; the caller wakes it. */
	void handOver(GroupMember m) {
		joining.add(m);
		changed = true;
	}

	/** Takes {@code m} from the thread; the caller wakes it. */
	void takeAway(GroupMember m) {
		m.running = false;
		leaving.add(m);
		changed = true;
	}

	/** Whether queues are waiting to join. */
	boolean hasJoining() {
		return !joining.isEmpty();
	}

	/** Whether queues were handed over or taken away since the thread last looked. */
	boolean changed() {
		return changed;
	}

	// ------------------------------------------------------------------ the poller
	// thread

	/** Clears {@link #changed()}, then takes the next queue handed over, or null. */
	@Nullable GroupMember nextJoining() {
		changed = false;
		return joining.poll();
	}

	/** The next queue taken away, or null. */
	@Nullable GroupMember nextLeaving() {
		return leaving.poll();
	}

	/** Takes {@code m} in: its buffer is made here, its channel counted. */
	void add(GroupMember m) {
		m.takenIn();
		members.add(m);
		byQueue.put(m.queue, m);
		if (m.token >= 0) {
			channelJoined(m.token, m.queue.channel());
		}
	}

	/**
	 * Removes {@code m}, taken away; false when it was not (or no longer) a member. A
	 * queue handed over and taken away again between the thread's look at the joining
	 * queues and its look at the leaving ones is still waiting to join: it is dropped
	 * there, or the thread would take it in at its next turn, for good (a member that
	 * already left: never empty, the thread would never retire).
	 */
	boolean remove(GroupMember m) {
		if (!members.remove(m)) {
			joining.remove(m);
			return false;
		}
		byQueue.remove(m.queue);
		if (m.token >= 0) {
			queuesOnChannel[m.token]--;
		}
		return true;
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

	boolean isEmpty() {
		return members.isEmpty();
	}

	int size() {
		return members.size();
	}

	GroupMember get(int i) {
		return members.get(i);
	}

	/** The member polling {@code queue}, or null when it is not this thread's. */
	@Nullable GroupMember byQueue(CompletionQueue queue) {
		return byQueue.get(queue);
	}

	/** The channel of {@code token}, or null when no queue of it has joined yet. */
	@Nullable CompletionChannel channel(int token) {
		return token < channels.length ? channels[token] : null;
	}

	/** This thread's queues on the channel of {@code token}. */
	int queuesOnChannel(int token) {
		return queuesOnChannel[token];
	}

	/**
	 * The thread ends: every member leaves, and the queues handed over or taken away
	 * since its last turn are let go.
	 */
	void leaveAll() {
		for (GroupMember m : members) {
			m.leave();
		}
		members.clear();
		byQueue.clear();
		// queues that joined but were never taken in (the thread failed)
		GroupMember m;
		while ((m = joining.poll()) != null) {
			m.abandon();
		}
		while ((m = leaving.poll()) != null) {
			m.abandon();
		}
	}

}
