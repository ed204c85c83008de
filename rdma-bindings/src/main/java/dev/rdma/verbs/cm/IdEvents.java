package dev.rdma.verbs.cm;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.jspecify.annotations.Nullable;

/**
 * The events of one {@link ConnectionId}: the queue the channel's readers deliver them to
 * (already acknowledged, see {@link EventChannel}), the id's wake-up signal, and the
 * waits for them, all bounded (a deadline, {@link ConnectionId#wakeUp()}, the id's
 * close). Thread-safe.
 */
final class IdEvents {

	private static final Set<CmEventType> IGNORED_WHILE_WAITING = EnumSet.of(CmEventType.ADDR_CHANGE,
			CmEventType.TIMEWAIT_EXIT);

	private final ConnectionId id;

	/**
	 * Raised by {@link ConnectionId#wakeUp()}, by the id's close and when another thread
	 * delivered an event of the id; polled by {@link EventChannel#pump}.
	 */
	final Signal signal = new Signal("the wake-up signal of an rdma_cm id");

	private final ArrayDeque<CmEvent> queue = new ArrayDeque<>();

	private final AtomicBoolean wakeRequested = new AtomicBoolean();

	/** Held by the thread that waits with the signal's scratch memory. */
	private final AtomicBoolean scratchTaken = new AtomicBoolean();

	IdEvents(ConnectionId id) {
		this.id = id;
	}

	/** See {@link ConnectionId#wakeUp()}. */
	void wakeUp() {
		wakeRequested.set(true);
		signal.raise();
	}

	/**
	 * The next event of the id before {@code deadline}: null on timeout or after a
	 * wake-up. Reads the channel at least once, also when the deadline has passed.
	 * @throws IllegalStateException when the id is closed, before or during the wait
	 */
	@Nullable CmEvent next(long deadline) {
		id.acquire();
		// the first waiter pumps with the signal's scratch memory (an accept or connect
		// loop waits again and again: nothing allocated per wait); a second one at the
		// same time with memory of its own
		boolean scratch = scratchTaken.compareAndSet(false, true);
		try {
			boolean looked = false;
			while (true) {
				synchronized (queue) {
					CmEvent e = queue.poll();
					if (e != null) {
						return e;
					}
				}
				if (id.closing()) {
					throw new IllegalStateException(
							id.describe() + " was closed by another thread while waiting for " + "an rdma_cm event");
				}
				if (wakeRequested.getAndSet(false)) {
					return null;
				}
				long left = deadline - System.nanoTime();
				if (left <= 0 && looked) {
					return null;
				}
				// look at the channel at least once, also with a zero timeout: an event
				// already there is read even when no other thread pumps
				id.channel().pump(id, Math.max(0, left), scratch);
				looked = true;
			}
		}
		finally {
			if (scratch) {
				scratchTaken.set(false);
			}
			id.release();
		}
	}

	/** The events queued and not yet taken (for tests and diagnostics). */
	int size() {
		synchronized (queue) {
			return queue.size();
		}
	}

	/**
	 * Queues an event read from the channel (under its event lock) and wakes the waiter;
	 * notes what the event changes: connected, disconnected, the request of a new id.
	 */
	void deliver(CmEvent event) {
		switch (event.type()) {
			case ESTABLISHED -> id.connected = true;
			case DISCONNECTED, DEVICE_REMOVAL -> id.disconnected = true;
			default -> {
			}
		}
		if (event.type() == CmEventType.CONNECT_REQUEST && event.id() != id) {
			event.id().request = event;
		}
		synchronized (queue) {
			queue.add(event);
		}
		signal.raise();
	}

	/**
	 * Waits for one of {@code wanted}; any error event, DISCONNECTED, a timeout or a
	 * wake-up throws {@link ConnectionException} naming {@code verb} and {@code what}.
	 */
	CmEvent await(String verb, String what, long deadline, Duration timeout, CmEventType... wanted) {
		while (true) {
			CmEvent e;
			try {
				e = next(deadline);
			}
			catch (IllegalStateException closed) {
				throw new IllegalStateException(verb + " " + what + ": " + closed.getMessage(), closed);
			}
			if (e == null) {
				if (System.nanoTime() - deadline >= 0) {
					throw new ConnectionException(verb, what + ": no " + Arrays.toString(wanted) + " within " + timeout,
							null);
				}
				throw new ConnectionException(verb, what + ": woken up by another thread (wakeUp)", null);
			}
			for (CmEventType w : wanted) {
				if (e.type() == w) {
					return e;
				}
			}
			if (!IGNORED_WHILE_WAITING.contains(e.type())) {
				throw new ConnectionException(verb, what + ": " + e.text() + ", " + e.statusText()
						+ (e.privateData().length > 0 ? ", " + e.privateData().length + " bytes of private data" : ""),
						e);
			}
		}
	}

	/** Takes a queued DISCONNECTED; true when there was one. */
	boolean takeDisconnected() {
		synchronized (queue) {
			return queue.removeIf(e -> e.type() == CmEventType.DISCONNECTED);
		}
	}

	/**
	 * Removes the connect requests nobody took from a listener's queue and returns their
	 * ids (none for an id that does not listen).
	 */
	List<ConnectionId> takeQueuedRequests() {
		List<ConnectionId> requests = new ArrayList<>();
		synchronized (queue) {
			queue.removeIf(e -> {
				if (e.type() == CmEventType.CONNECT_REQUEST && e.id() != id) {
					requests.add(e.id());
					return true;
				}
				return false;
			});
		}
		return requests;
	}

}
