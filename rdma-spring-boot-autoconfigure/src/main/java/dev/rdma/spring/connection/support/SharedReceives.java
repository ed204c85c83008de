package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.LongAdder;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.AsyncEvent;
import dev.rdma.verbs.AsyncEventType;
import dev.rdma.verbs.ChainPostException;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.ReceiveWorkRequest;
import dev.rdma.verbs.SharedReceiveQueue;

/**
 * The receive buffers of a server whose peers share one receive queue
 * ({@code rdma.connections.<name>.shared-receive-queue}): one SRQ ({@code ibv_create_srq}
 * of {@code depth}) that every peer's QP is created on, one registered region of
 * {@code depth × message-size} bytes, one {@link ReceivedMessage} and one
 * {@link ReceiveWorkRequest} per buffer (made once, reused: no allocation per message).
 * The receive memory no longer grows with {@code max-peers}.
 *
 * <p>
 * <b>Routing.</b> A buffer's wr_id is {@link #SHARED}, this object's id and the buffer's
 * index; the {@link CompletionRouter} hands the completion to the peer whose QP number it
 * carries, whose {@link PeerReceives} delivers the message as that peer's (its listener,
 * its counters, {@code message.connection()}) and gives the buffer back here. A
 * completion whose QP already left (a peer closed while its messages were still in the
 * queue) is an {@link #orphan}: the buffer is posted again, never lost.
 *
 * <p>
 * <b>Re-posting.</b> Buffers given back on the receive poller are posted at the end of
 * the poll batch as one chain ({@code ibv_post_srq_recv} of a list); a retained message
 * released later is posted at once. A buffer whose post failed waits for the refill: the
 * {@code SRQ_LIMIT_REACHED} event (fewer than {@code limit} receives posted), read by the
 * device's async-event thread, posts every such buffer and arms the limit again.
 *
 * <p>
 * <b>Threads and lifetime.</b> Made by the server when it starts (after its protection
 * domain), closed when it stops, after every peer: a peer leaving takes none of the
 * buffers with it.
 */
public final class SharedReceives {

	private static final Log logger = LogFactory.getLog(SharedReceives.class);

	/**
	 * Marks the wr_id of a shared receive buffer (a receive: neither SEND nor ONE_SIDED).
	 */
	static final long SHARED = 1L << 59;

	private static final AtomicInteger ids = new AtomicInteger();

	/** The open shared receives, by SRQ: where the async-event thread finds them. */
	private static final Map<SharedReceiveQueue, SharedReceives> OPEN = new ConcurrentHashMap<>();

	private final int id;

	private final ConnectionSettings settings;

	private final int limit;

	private final SharedReceiveQueue srq;

	private final MemoryRegion region;

	private final ReceivedMessage[] messages;

	private final ReceiveWorkRequest[] requests;

	private final List<CompletionRouter> routers;

	/**
	 * Buffers given back during the current poll batch, posted as one chain at its end
	 * (receive poller only; capacity for every buffer: never grows).
	 */
	private final ArrayList<ReceiveWorkRequest> reposts;

	/** Whether the router was told of {@link #reposts} in this batch (poller only). */
	private boolean repostsScheduled;

	/** 1 for a buffer whose post failed: the next refill posts it. */
	private final AtomicIntegerArray unposted;

	private final LongAdder refilled = new LongAdder();

	private final LongAdder orphans = new LongAdder();

	private volatile boolean closed;

	private SharedReceives(ConnectionSettings settings, ConnectionSettings.SharedReceive shared, SharedReceiveQueue srq,
			MemoryRegion region, List<CompletionRouter> routers) {
		this.id = 1 + (ids.getAndIncrement() & 0x7ffe); // 1..0x7fff, in bits 32..47 of
														// the wr_id
		this.settings = settings;
		this.limit = shared.limit();
		this.srq = srq;
		this.region = region;
		this.routers = routers;
		int size = settings.messageSize();
		int depth = shared.depth();
		this.messages = new ReceivedMessage[depth];
		this.requests = new ReceiveWorkRequest[depth];
		this.reposts = new ArrayList<>(depth);
		this.unposted = new AtomicIntegerArray(depth);
		MemorySegment buffers = region.buffer();
		for (int i = 0; i < depth; i++) {
			messages[i] = new ReceivedMessage(i, buffers.asSlice((long) i * size, size));
			requests[i] = new ReceiveWorkRequest().wrId(SHARED | ((long) id << 32) | i)
				.buffer(region, (long) i * size, size);
		}
	}

	/**
	 * Creates the SRQ and its buffers in {@code pd}, posts every buffer, arms the limit
	 * and joins {@code routers}; what was made is closed again when a step fails.
	 */
	static SharedReceives open(ConnectionSettings settings, ProtectionDomain pd, List<CompletionRouter> routers) {
		ConnectionSettings.SharedReceive shared = settings.sharedReceive();
		if (shared == null) {
			throw new IllegalStateException("connection '" + settings.name() + "' has no shared receive queue");
		}
		SharedReceiveQueue srq = pd.createSharedReceiveQueue(shared.depth());
		MemoryRegion region = null;
		SharedReceives receives = null;
		try {
			region = pd.registerMemory((long) settings.messageSize() * shared.depth(),
					EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			SharedReceives made = new SharedReceives(settings, shared, srq, region, routers);
			receives = made;
			routers.forEach(r -> r.add(made));
			OPEN.put(srq, made);
			srq.postRecv(List.of(made.requests));
			if (shared.limit() > 0) {
				srq.armLimit(shared.limit());
			}
			return receives;
		}
		catch (RuntimeException | Error ex) {
			if (receives != null) {
				receives.closed = true;
				OPEN.remove(srq);
				SharedReceives made = receives;
				routers.forEach(r -> r.remove(made));
			}
			try {
				srq.close();
			}
			catch (RuntimeException suppressed) {
				ex.addSuppressed(suppressed);
			}
			if (region != null) {
				try {
					region.close();
				}
				catch (RuntimeException suppressed) {
					ex.addSuppressed(suppressed);
				}
			}
			throw ex;
		}
	}

	/** The SRQ the peers' QPs are created on. */
	SharedReceiveQueue queue() {
		return srq;
	}

	/** The id in the wr_ids of this object's buffers. */
	int id() {
		return id;
	}

	/** Whether {@code wrId} is one of this object's buffers. */
	boolean owns(long wrId) {
		return (wrId & SHARED) != 0 && (int) ((wrId >>> 32) & 0xffff) == id;
	}

	/** The message of buffer {@code index}. */
	ReceivedMessage message(int index) {
		return messages[index];
	}

	/**
	 * Buffer {@code index} is free again after its listener call: posted with the batch's
	 * others at its end. Receive poller.
	 */
	void giveBack(int index) {
		if (!closed) {
			reposts.add(requests[index]);
		}
	}

	/** True once per batch when buffers wait in {@link #reposts}. Receive poller. */
	boolean scheduleReposts() {
		if (repostsScheduled || reposts.isEmpty()) {
			return false;
		}
		repostsScheduled = true;
		return true;
	}

	/**
	 * Posts the buffers the batch gave back as one chain; those not posted wait for the
	 * refill. Receive poller.
	 */
	void postReposts() {
		repostsScheduled = false;
		int n = reposts.size();
		if (n == 0) {
			return;
		}
		try {
			if (!closed) {
				srq.postRecv(reposts); // a chain of one is the single post (the
										// binding's)
			}
		}
		catch (ChainPostException ex) {
			for (int i = Math.max(0, ex.postedCount()); i < n; i++) {
				unposted.set((int) reposts.get(i).wrId(), 1);
			}
			postFailed(n, ex);
		}
		catch (RuntimeException ex) {
			for (int i = 0; i < n; i++) {
				unposted.set((int) reposts.get(i).wrId(), 1);
			}
			postFailed(n, ex);
		}
		finally {
			reposts.clear();
		}
	}

	/**
	 * Posts buffer {@code index} at once (a released message, an orphan, a refill); on
	 * failure it waits for the next refill. Any thread.
	 */
	void repost(int index) {
		if (closed) {
			return;
		}
		try {
			srq.postRecv(requests[index]);
		}
		catch (RuntimeException ex) {
			unposted.set(index, 1);
			postFailed(1, ex);
		}
	}

	private void postFailed(int n, RuntimeException ex) {
		if (!closed) {
			logger.warn("Posting " + n + " receive buffer(s) to the shared receive queue of connection '"
					+ settings.name() + "' failed; posted again at the next SRQ_LIMIT_REACHED refill", ex);
		}
	}

	/**
	 * A receive completion of buffer {@code index} whose QP matches no connection (its
	 * peer was closed): the message is dropped, the buffer posted again. Receive poller.
	 */
	void orphan(int index) {
		orphans.increment();
		repost(index);
	}

	/**
	 * {@code SRQ_LIMIT_REACHED}: posts every buffer whose post failed, then arms the
	 * limit again. The device's async-event thread.
	 */
	void limitReached() {
		if (closed) {
			return;
		}
		int posted = 0;
		for (int i = 0; i < messages.length; i++) {
			if (unposted.get(i) == 1 && unposted.compareAndSet(i, 1, 0)) {
				repost(i);
				posted++;
			}
		}
		refilled.add(posted);
		try {
			srq.armLimit(limit);
		}
		catch (RuntimeException ex) {
			if (!closed) {
				logger.warn("Arming the limit of the shared receive queue of connection '" + settings.name()
						+ "' again failed", ex);
			}
		}
		if (logger.isDebugEnabled()) {
			logger.debug("Shared receive queue of connection '" + settings.name() + "' below its limit " + limit + ": "
					+ posted + " buffer(s) refilled, limit armed again");
		}
	}

	/**
	 * Hands an async event of an SRQ to the server that owns it:
	 * {@code SRQ_LIMIT_REACHED} refills it and arms its limit again, {@code SRQ_ERR} is
	 * logged. Called by the async-event thread of each device
	 * ({@code rdma-async-<device>}); never blocks.
	 * @return whether the event was an SRQ's of a server of this JVM
	 */
	public static boolean onAsyncEvent(AsyncEvent event) {
		SharedReceiveQueue queue = event.sharedReceiveQueue();
		if (queue == null) {
			return false;
		}
		SharedReceives receives = OPEN.get(queue);
		if (receives == null) {
			return false;
		}
		if (event.type() == AsyncEventType.SRQ_LIMIT_REACHED) {
			receives.limitReached();
		}
		else if (event.type() == AsyncEventType.SRQ_ERR) {
			logger.error("The shared receive queue of connection '" + receives.settings.name() + "' reported "
					+ event.description() + " (IBV_EVENT_SRQ_ERR): its peers receive nothing more");
		}
		return true;
	}

	/** Buffers posted again by refills so far. */
	long refilled() {
		return refilled.sum();
	}

	/** Receive completions of QPs that had left (their buffers posted again). */
	long orphans() {
		return orphans.sum();
	}

	/** Bytes of the registered buffers. */
	long bytes() {
		return region.buffer().byteSize();
	}

	/**
	 * Closes the SRQ and its buffers (every peer closed before; on a poller thread once
	 * its poll has ended, after the peers' QPs).
	 */
	void close() {
		if (closed) {
			return;
		}
		closed = true;
		OPEN.remove(srq);
		routers.forEach(r -> r.remove(this));
		// a failure is logged: a peer whose close timed out still holds a QP on the SRQ,
		// and its protection domain closes the SRQ after that QP
		PeerConnection.closeQuietly(srq, settings.name());
		PeerConnection.closeQuietly(region, settings.name());
	}

	@Override
	public String toString() {
		return "SharedReceives[" + settings.name() + ", " + messages.length + " buffers, limit " + limit + "]";
	}

	/** The SRQ while open, else null ({@link ServerConnection#sharedReceiveQueue()}). */
	@Nullable SharedReceiveQueue queueIfOpen() {
		return closed ? null : srq;
	}

}
