package dev.rdma.verbs;

import java.util.concurrent.atomic.AtomicLong;

import dev.rdma.verbs.ffm.Ibverbs;

/**
 * The completion-channel events of one {@link CompletionQueue}: how many were got
 * ({@code ibv_get_cq_event}, counted by the channel) and acknowledged
 * ({@code ibv_ack_cq_events}), never more acks than gets, and the destroy that acks every
 * outstanding one first ({@code ibv_destroy_cq} waits for them forever). One lock orders
 * the acks and the destroy: an ack runs before the destroy (and is counted) or after it
 * (and is refused), never on the freed CQ. Thread-safe.
 */
final class CqEventCounts {

	private final CompletionQueue cq;

	private final AtomicLong got = new AtomicLong();

	private final AtomicLong acked = new AtomicLong();

	private final Object ackLock = new Object();

	/** Set under ackLock once ibv_destroy_cq succeeded. */
	private boolean destroyedNatively;

	CqEventCounts(CompletionQueue cq) {
		this.cq = cq;
	}

	void got() {
		got.incrementAndGet();
	}

	long gotCount() {
		return got.get();
	}

	long ackedCount() {
		return acked.get();
	}

	long unacked() {
		synchronized (ackLock) {
			return got.get() - acked.get();
		}
	}

	/** Acks every got-but-unacked event in one call; returns how many. */
	int ackAll() {
		synchronized (ackLock) {
			return ack(got.get() - acked.get());
		}
	}

	/**
	 * Acks {@code n} events.
	 * @throws IllegalArgumentException when {@code n} exceeds the unacked events
	 */
	void ack(int n) {
		synchronized (ackLock) {
			long unacked = got.get() - acked.get();
			if (n < 0 || n > unacked) {
				throw new IllegalArgumentException(
						"cannot ack " + n + " events: " + unacked + " got and unacked on " + cq.describe());
			}
			ack((long) n);
		}
	}

	private int ack(long n) {
		if (n <= 0) {
			return 0;
		}
		if (destroyedNatively) {
			// under ackLock: an ack never reaches a destroyed CQ (the destroy runs under
			// the same lock)
			throw cq.closedException();
		}
		nativeAck((int) n);
		acked.addAndGet(n);
		return (int) n;
	}

	/**
	 * {@code ibv_ack_cq_events}; with 0 it only takes and releases the CQ's event mutex.
	 */
	void nativeAck(int n) {
		try {
			Ibverbs.ACK_CQ_EVENTS.invokeExact(cq.handle, n);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/**
	 * Under the ack lock: acks every outstanding event, then runs {@code destroy}
	 * ({@code ibv_destroy_cq}, which throws when refused); afterwards every ack is
	 * refused.
	 */
	void ackAllAndDestroy(Runnable destroy) {
		synchronized (ackLock) {
			ackAll();
			destroy.run();
			destroyedNatively = true;
		}
	}

}
