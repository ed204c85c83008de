package dev.rdma.spring.listener;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The hand-over of queues between the {@link PollerGroup} and one poller thread, as the
 * thread applies it ({@code GroupPollLoop.applyMembership}: the joining queues, then the
 * leaving ones).
 */
class GroupMembersTests {

	/**
	 * A container started and stopped at once (its group's other containers failed to
	 * start): its queue is handed over and taken away between the thread's look at the
	 * joining queues and its look at the leaving ones. It leaves without having joined,
	 * and must not join at the thread's next turn: a member that already left would keep
	 * the thread from ever retiring (a non-daemon thread: the JVM would not exit).
	 */
	@Test
	void aQueueTakenAwayBeforeTheThreadTookItInNeverJoins() {
		GroupMembers members = new GroupMembers();
		GroupMember m = member("q");
		assertThat(members.nextJoining()).as("the thread's look at the joining queues").isNull();
		members.handOver(m);
		members.takeAway(m);
		assertThat(members.nextLeaving()).isSameAs(m);
		assertThat(members.remove(m)).as("a member when taken away").isFalse();
		assertThat(members.nextLeaving()).isNull();
		assertThat(members.nextJoining()).as("joining at the next turn").isNull();
		assertThat(members.hasJoining()).isFalse();
		assertThat(members.isEmpty()).isTrue();
	}

	/** The usual order: taken in at one turn, taken away at a later one. */
	@Test
	void aQueueTakenInLeavesWhenTakenAway() {
		GroupMembers members = new GroupMembers();
		GroupMember m = member("q");
		members.handOver(m);
		assertThat(members.nextJoining()).isSameAs(m);
		members.add(m);
		assertThat(members.size()).isOne();
		members.takeAway(m);
		assertThat(m.running).isFalse();
		assertThat(members.nextLeaving()).isSameAs(m);
		assertThat(members.remove(m)).isTrue();
		assertThat(members.isEmpty()).isTrue();
		assertThat(members.byQueue(m.queue)).isNull();
		m.leave();
		assertThat(m.buffer).as("its buffer, freed on leaving").isNull();
	}

	private static GroupMember member(String name) {
		return new GroupMember(name, PollerStubs.queue(null), null, PollerMetrics.NONE, false, 16, 16);
	}

}
