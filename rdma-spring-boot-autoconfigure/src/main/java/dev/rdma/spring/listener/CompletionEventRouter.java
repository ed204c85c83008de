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
	 * Wakes the poller of {@code queue}, if there is one; false when none is registered
	 * (the queue's container stopped): the caller then acks the event itself.
	 */
	boolean wake(CompletionQueue queue) {
		Runnable waker = wakers.get(queue);
		if (waker != null) {
			waker.run();
			return true;
		}
		return false;
	}

}
