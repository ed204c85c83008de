package dev.rdma.spring.listener;

import dev.rdma.verbs.CompletionQueue;

/**
 * The completion-event bookkeeping both poll loops share ({@link PollLoop} for one queue,
 * {@link GroupMember} for each queue of a group): the events got since the last count go
 * to the metrics, and the events are acknowledged every ack-batch events.
 */
final class CompletionEvents {

	private CompletionEvents() {
	}

	/**
	 * Counts the events {@code queue} got since {@code seen} and acks them every
	 * {@code ackBatch} events, or all of them; on the queue's poller thread.
	 * @return the events counted so far, the next call's {@code seen}
	 */
	static long countAndAck(CompletionQueue queue, PollerMetrics metrics, long seen, int ackBatch, boolean all) {
		long counted = seen;
		try {
			long got = queue.eventsGot();
			if (got != counted) {
				metrics.events(got - counted);
				counted = got;
			}
			long unacked = queue.eventsUnacked();
			if (unacked > 0 && (all || unacked >= ackBatch)) {
				metrics.acks(queue.ackEvents());
			}
		}
		catch (IllegalStateException ex) {
			// the queue is already closed; closing acked every event
		}
		return counted;
	}

}
