package dev.rdma.spring.connection.support;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.listener.ListenerInvoker;
import dev.rdma.verbs.WorkCompletion;

/**
 * The listener of a completion queue that connections use: hands each completion to the
 * {@link PeerConnection} whose QP number it carries ({@code wc.qp_num}, valid for failed
 * completions too). Runs on the queue's poller thread, registered with the listener
 * registry like an {@code @RdmaCompletionListener}, so the queue keeps its poller, its
 * meters and its ordered shutdown.
 *
 * <p>
 * The connections are a copy-on-write array, scanned linearly: no allocation and no lock
 * per completion; a queue serves a handful of connections (a server's peers at most).
 * Completions of a QP that already left (its close timed out) are counted and dropped;
 * when one is a receive of a server's shared receive queue, its buffer is posted again
 * ({@link SharedReceives#orphan}): the SRQ outlives its peers.
 */
public final class CompletionRouter implements ListenerInvoker {

	private final String queue;

	private volatile PeerConnection[] connections = new PeerConnection[0];

	private final LongAdder unrouted = new LongAdder();

	/** The shared receive queues whose completions this queue delivers. */
	private volatile SharedReceives[] shared = new SharedReceives[0];

	/**
	 * The connections whose receives of the current batch wait to be posted as one chain
	 * at its end (poller thread only; grows, never shrinks).
	 */
	private PeerConnection[] reposting = new PeerConnection[4];

	private int repostingCount;

	/** The thread that delivered the last completion: the queue's poller. */
	private volatile @Nullable Thread poller;

	public CompletionRouter(String queue) {
		this.queue = queue;
	}

	/** The queue's key. */
	public String queue() {
		return queue;
	}

	synchronized void add(PeerConnection connection) {
		connections = with(connections, connection);
	}

	synchronized void remove(PeerConnection connection) {
		connections = without(connections, connection);
	}

	synchronized void add(SharedReceives receives) {
		shared = with(shared, receives);
	}

	synchronized void remove(SharedReceives receives) {
		shared = without(shared, receives);
	}

	/** A copy of {@code array} with {@code element} appended (copy-on-write). */
	private static <T> T[] with(T[] array, T element) {
		T[] next = Arrays.copyOf(array, array.length + 1);
		next[array.length] = element;
		return next;
	}

	/** A copy of {@code array} without {@code element} (by identity; copy-on-write). */
	private static <T> T[] without(T[] array, T element) {
		return Arrays.stream(array).filter(e -> e != element).toArray(n -> Arrays.copyOf(array, n));
	}

	/**
	 * Whether {@code thread} is the one that delivers this queue's completions, as far as
	 * known (false before the first completion).
	 */
	boolean isPoller(Thread thread) {
		return poller == thread;
	}

	/** Completions that matched no connection. */
	public long unrouted() {
		return unrouted.sum();
	}

	@Override
	public void invoke(Object argument) {
		WorkCompletion completion = (WorkCompletion) argument;
		Thread current = Thread.currentThread();
		if (poller != current) {
			poller = current;
		}
		int qpNum = completion.qpNum();
		for (PeerConnection c : connections) {
			if (c.qpNum() == qpNum) {
				c.onCompletion(completion);
				// only a receive's poller gives buffers back, and only it may post them:
				// a
				// send queue's poller (another thread when the queues differ) must not
				// take the receive poller's batch over
				if (PeerConnection.isReceive(completion.wrId()) && c.scheduleReposts()) {
					if (repostingCount == reposting.length) {
						reposting = Arrays.copyOf(reposting, 2 * repostingCount);
					}
					reposting[repostingCount++] = c;
				}
				return;
			}
		}
		unrouted.increment();
		long wrId = completion.wrId();
		if ((wrId & SharedReceives.SHARED) != 0 && PeerConnection.isReceive(wrId)) {
			for (SharedReceives s : shared) {
				if (s.owns(wrId)) {
					s.orphan((int) wrId);
					return;
				}
			}
		}
	}

	/** Posts, one chain per connection, the receive buffers the batch gave back. */
	@Override
	public void batchEnded() {
		for (int i = 0; i < repostingCount; i++) {
			PeerConnection c = reposting[i];
			reposting[i] = null;
			c.postReposts();
		}
		repostingCount = 0;
	}

}
