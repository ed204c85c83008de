package dev.rdma.verbs;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The claim of a {@link SendWorkRequest} or {@link ReceiveWorkRequest}: a post holds its
 * work request for the duration of the native call, so that a second post of the same
 * work request (on any QP, from any thread) and a close are refused instead of rewriting
 * the native struct under the provider. One compare-and-set per post, no allocation.
 */
final class WorkRequestClaim {

	private static final int FREE = 0;

	private static final int POSTING = 1;

	private static final int CLOSED = 2;

	private static final VarHandle STATE = VarHandles.field(MethodHandles.lookup(), "state", int.class);

	private volatile int state;

	/**
	 * Claims the work request for one post.
	 * @throws IllegalStateException when it is closed, or another post holds it
	 */
	void claim(String verb, Object describe) {
		if (!STATE.compareAndSet(this, FREE, POSTING)) {
			throw new IllegalStateException(verb + " of " + describe + " is refused: " + (state == CLOSED
					? "it is closed" : "another post is using it (a work request is posted by one thread at a time)"));
		}
	}

	void unclaim() {
		STATE.setRelease(this, FREE);
	}

	/**
	 * Marks the work request closed; idempotent. A post in flight on another thread (a
	 * native call that does not block) is waited for.
	 */
	void close() {
		while (true) {
			int s = state;
			if (s == CLOSED || (s == FREE && STATE.compareAndSet(this, FREE, CLOSED))) {
				return;
			}
			Thread.onSpinWait();
		}
	}

	boolean isClosed() {
		return state == CLOSED;
	}

}
