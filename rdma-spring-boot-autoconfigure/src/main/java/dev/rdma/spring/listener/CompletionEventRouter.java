package dev.rdma.spring.listener;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.rdma.verbs.CompletionQueue;

/**
 * How to wake the poller of each queue that may share a completion channel with queues of
 * other pollers. A poller that takes an event of another queue from the shared channel
 * (the binding counted it on that queue) wakes that queue's poller through here, so it
 * drains and acks without waiting for its wait to time out: a dedicated poller's waker,
 * or a mark on the queue in its group thread followed by that thread's wake-up. Queues
 * are compared by identity. Thread-safe; looking a queue up allocates nothing.
 */
public final class CompletionEventRouter {

	private final Map<CompletionQueue, Runnable> wakers = new ConcurrentHashMap<>();

	/** Routes the events of {@code queue} to {@code waker}. */
	void register(CompletionQueue queue, Runnable waker) {
		wakers.put(queue, waker);
	}

	/** Stops routing the events of {@code queue} to {@code waker}. */
	void unregister(CompletionQueue queue, Runnable waker) {
		wakers.remove(queue, waker);
	}

	/**
	 * Wakes the poller of {@code queue}; with none registered (the queue's container
	 * stopped while its CQ, armed, still raised an event on a shared channel) acks the
	 * event here, as nobody else will.
	 */
	void wake(CompletionQueue queue) {
		Runnable waker = wakers.get(queue);
		if (waker != null) {
			waker.run();
			return;
		}
		try {
			queue.ackEvents();
		}
		catch (IllegalStateException closed) {
			// closed meanwhile: closing acked every event
		}
	}

}
