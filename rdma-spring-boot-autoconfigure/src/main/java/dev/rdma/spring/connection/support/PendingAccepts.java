package dev.rdma.spring.connection.support;

import java.util.ArrayList;
import java.util.List;

/**
 * A server transport's accepted peers whose handshake has not ended yet (rdma_cm: the
 * ESTABLISHED of an {@code rdma_accept}; out of band: the client's {@code "done"}), in
 * accept order. The accepting thread adds them and checks them at each turn, without
 * blocking, so that a peer that never ends its handshake holds up no other peer's accept;
 * they count against {@code max-peers} ({@link #size()}) until each is handed to the
 * server, established or failed. {@link #close} (stopping) takes those left. Thread-safe.
 *
 * @param <R> the transport's request
 */
final class PendingAccepts<R extends PendingPeer & ServerTransport.Request> {

	/** Whether a request's handshake has ended, without blocking. */
	@FunctionalInterface
	interface Check<R> {

		/**
		 * True once ended; false while it goes on.
		 * @throws RuntimeException when it failed, or its {@code connect-timeout} passed
		 */
		boolean ended(R request);

	}

	private final List<R> pending = new ArrayList<>();

	/** Set by {@link #close}: no request is added any more. Guarded by pending. */
	private boolean closed;

	/**
	 * Runs {@code last} (the accept's last step, e.g. {@code rdma_accept}), then adds
	 * {@code request}, both under the lock that {@link #close} takes: false (nothing run,
	 * nothing added) once close took the pending requests, and the caller drops it.
	 */
	boolean add(R request, Runnable last) {
		synchronized (pending) {
			if (closed) {
				return false;
			}
			last.run();
			pending.add(request);
			return true;
		}
	}

	/** The requests pending. */
	int size() {
		synchronized (pending) {
			return pending.size();
		}
	}

	/**
	 * Hands each pending request whose handshake ended to {@code server}
	 * ({@link ServerConnection#established}), and each one that failed to
	 * {@link ServerConnection#acceptFailed}.
	 */
	void check(ServerConnection server, Check<R> check) {
		List<R> now;
		synchronized (pending) {
			if (pending.isEmpty()) {
				return;
			}
			now = new ArrayList<>(pending);
		}
		for (R r : now) {
			RuntimeException failure = null;
			boolean ended = false;
			try {
				ended = check.ended(r);
			}
			catch (RuntimeException ex) {
				failure = ex;
			}
			if (!ended && failure == null) {
				continue;
			}
			synchronized (pending) {
				if (!pending.remove(r)) {
					continue; // taken by close (stopping)
				}
			}
			PeerConnection peer = r.peer();
			if (failure == null && peer != null) {
				server.established(r, peer);
			}
			else {
				server.acceptFailed(r, (failure != null) ? failure
						: new AttemptFailedException("ERROR", "the accept of " + r.from() + " made no peer"));
			}
		}
	}

	/**
	 * Stopping: takes the requests left (the caller closes them, with everything made for
	 * them); none is added from now on.
	 */
	List<R> close() {
		synchronized (pending) {
			closed = true;
			List<R> left = new ArrayList<>(pending);
			pending.clear();
			return left;
		}
	}

}
