package dev.rdma.spring.listener;

import java.util.ArrayDeque;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

/**
 * Knows whether the current thread is a poller thread (a dedicated
 * {@code rdma-poller-<queue>} or a group thread {@code rdma-poller-<group>-<n>}), and
 * lets shutdown code that runs on one close native objects once the poll it is inside has
 * ended.
 *
 * <p>
 * Why: a listener (an {@code @RdmaCompletionListener}, or an {@code @RdmaMessageListener}
 * whose router runs inside the poll) may close the application context, call
 * {@code SpringApplication.exit} or {@code System.exit}. The whole shutdown then runs on
 * the poller thread, inside the poll of one of its queues. That thread cannot wait for
 * itself (to stop, or to drain flushed work requests), and the binding refuses to destroy
 * a completion queue from inside its own poll (its exclusive slot is held). So, on a
 * poller thread, shutdown does not wait for the poller (it stops once the listener
 * returns) and hands the native objects it would close to
 * {@link #closeWhenPollEnds(AutoCloseable)}: the poller thread closes them, in the order
 * they were handed over, as soon as the poll has returned (at the start of the poller's
 * next turn, and when its loop ends).
 */
public final class PollerThreads {

	private static final Log logger = LogFactory.getLog(PollerThreads.class);

	private static final ThreadLocal<@Nullable ArrayDeque<AutoCloseable>> DEFERRED = new ThreadLocal<>();

	private PollerThreads() {
	}

	/** Whether the current thread is a poller thread (dedicated or of a group). */
	public static boolean isPollerThread() {
		return DEFERRED.get() != null;
	}

	/**
	 * On a poller thread, keeps {@code resource} to be closed by this thread once its
	 * poll has returned, and returns true; on any other thread does nothing and returns
	 * false (the caller closes it).
	 * @param resource what to close
	 * @return whether the close was deferred
	 */
	public static boolean closeWhenPollEnds(AutoCloseable resource) {
		ArrayDeque<AutoCloseable> deferred = DEFERRED.get();
		if (deferred == null) {
			return false;
		}
		deferred.add(resource);
		return true;
	}

	/**
	 * Marks the current thread as a poller thread (its loop starts).
	 * @return what will be deferred on this thread: a loop checks it is empty before
	 * calling {@link #closeDeferred()}
	 */
	static ArrayDeque<AutoCloseable> enter() {
		ArrayDeque<AutoCloseable> deferred = new ArrayDeque<>();
		DEFERRED.set(deferred);
		return deferred;
	}

	/**
	 * Closes what was deferred on this thread, in order; called outside any poll. A
	 * failure is logged and the next resource is closed all the same.
	 */
	static void closeDeferred() {
		ArrayDeque<AutoCloseable> deferred = DEFERRED.get();
		if (deferred == null) {
			return;
		}
		AutoCloseable resource;
		while ((resource = deferred.poll()) != null) {
			try {
				resource.close();
			}
			catch (Exception ex) {
				logger.warn("Closing " + resource + " after the poll of '" + Thread.currentThread().getName()
						+ "' ended failed", ex);
			}
		}
	}

	/** Closes what was deferred and unmarks the current thread (its loop ended). */
	static void exit() {
		try {
			closeDeferred();
		}
		finally {
			DEFERRED.remove();
		}
	}

}
