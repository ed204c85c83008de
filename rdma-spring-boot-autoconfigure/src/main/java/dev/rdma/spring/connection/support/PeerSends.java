package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.SendQueueFullException;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.WcStatus;

/**
 * The send path of a {@link PeerConnection}: its registered region of {@code send-depth}
 * buffers of {@code message-size} bytes, the {@link SendBufferPool} that lends them, and
 * one {@link SendWorkRequest} per buffer, filled once (its wr_id and buffer) and reused:
 * a post sets only the length, the opcode and, for an RDMA operation, the remote address.
 * A sender takes a free buffer ({@link #take}), copies its message in and posts it; the
 * one-sided operations ({@link PeerOneSided}) take and post the same buffers. A buffer's
 * index belongs to one thread at a time (the pool's lock orders the hand-overs), so its
 * work request needs no lock of its own.
 *
 * <p>
 * <b>Inline and selective signaling</b> ({@link ConnectionSettings.DataPath}). A SEND of
 * at most the QP's granted {@code max_inline_data} is posted IBV_SEND_INLINE. One SEND in
 * {@code signal-interval} is posted signaled, and so is every SEND that takes the last
 * free buffer (a sender waiting for a buffer always has a signaled completion to wait
 * for) and every RDMA operation. Each post gets a sequence number under the post lock
 * (held only for the choice, the record and the post) and its buffer index goes into a
 * ring in post order; a completion (a signaled one, or any failed one: the provider
 * reports every failed and flushed work request, signaled or not) gives back, in order,
 * the buffers of the unsignaled SENDs posted before it, which completed without a
 * completion of their own, as sent. A close whose last post was unsignaled posts a
 * signaled marker after moving the QP to the error state: its flushed completion gives
 * back whatever is left.
 */
final class PeerSends extends PeerPart {

	private final QueuePair qp;

	private final MemoryRegion region;

	private final MemorySegment buffers;

	private final ByteBuffer view;

	private final SendBufferPool pool;

	private final int[] lengths;

	private final SendWorkRequest[] requests;

	private final long timeoutNanos;

	/** Ring entries of RDMA operations, which {@link PeerOneSided} completes itself. */
	private static final int ONE_SIDED_ENTRY = 1 << 30;

	private static final SendWorkRequest.Flag[] UNSIGNALED = {};

	private static final SendWorkRequest.Flag[] SIGNALED = { SendWorkRequest.Flag.SIGNALED };

	private static final SendWorkRequest.Flag[] UNSIGNALED_INLINE = { SendWorkRequest.Flag.INLINE };

	private static final SendWorkRequest.Flag[] SIGNALED_INLINE = { SendWorkRequest.Flag.SIGNALED,
			SendWorkRequest.Flag.INLINE };

	/** Orders the posts: the sequence numbers, the ring and the signaling choice. */
	private final ReentrantLock postLock = new ReentrantLock();

	/** The next sequence number (under postLock). */
	private long posted;

	/** Unsignaled SENDs posted since the last signaled post (under postLock). */
	private int sinceSignaled;

	/** Buffer index (or ONE_SIDED_ENTRY | index) of each sequence number, mod length. */
	private final AtomicIntegerArray ring;

	/** The sequence number of the last post of each buffer index (marker included). */
	private final AtomicLongArray sequenceOf;

	/** The next sequence number to give back (poller thread only). */
	private long reclaimed;

	private final int inline;

	private final int signalInterval;

	/** The work request of the close's marker (index sendDepth). */
	private final SendWorkRequest marker;

	private final int markerIndex;

	PeerSends(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters, QueuePair qp,
			MemoryRegion region) {
		super(peer, settings, counters);
		this.qp = qp;
		this.region = region;
		this.buffers = region.buffer();
		this.view = buffers.asByteBuffer();
		this.pool = new SendBufferPool(settings.sendDepth());
		this.lengths = new int[settings.sendDepth()];
		this.timeoutNanos = SendBufferPool.nanos(settings.sendTimeout());
		int size = settings.messageSize();
		this.requests = new SendWorkRequest[settings.sendDepth()];
		for (int i = 0; i < requests.length; i++) {
			requests[i] = new SendWorkRequest().wrId(PeerConnection.SEND | i).buffer(region, (long) i * size, size);
		}
		this.markerIndex = settings.sendDepth();
		this.marker = new SendWorkRequest().wrId(PeerConnection.SEND | markerIndex)
			.buffer(region, 0, 0)
			.flags(SIGNALED);
		this.ring = new AtomicIntegerArray(settings.sendDepth() + 1);
		this.sequenceOf = new AtomicLongArray(settings.sendDepth() + 1);
		this.inline = Math.min(qp.maxInlineData(), settings.dataPath().maxInlineData() == 0 ? 0 : Integer.MAX_VALUE);
		this.signalInterval = settings.dataPath().signalInterval();
	}

	/** The largest SEND posted inline (the QP's max_inline_data, or 0). */
	int inlineLimit() {
		return inline;
	}

	MemoryRegion region() {
		return region;
	}

	/** The send buffers (one {@code message-size} slice per index). */
	MemorySegment buffers() {
		return buffers;
	}

	SendBufferPool pool() {
		return pool;
	}

	long timeoutNanos() {
		return timeoutNanos;
	}

	/** The length last posted from buffer {@code index}. */
	int length(int index) {
		return lengths[index];
	}

	void send(byte[] data, int offset, int length) {
		java.util.Objects.checkFromIndexSize(offset, length, data.length);
		int index = take(length);
		MemorySegment.copy(data, offset, buffers, ValueLayout.JAVA_BYTE, (long) index * settings.messageSize(), length);
		post(index, length);
	}

	void send(ByteBuffer data) {
		int length = data.remaining();
		int index = take(length);
		// an absolute bulk put: the shared view's position is never changed
		view.put(index * settings.messageSize(), data, data.position(), length);
		post(index, length);
	}

	void send(MemorySegment data) {
		if (data.byteSize() > Integer.MAX_VALUE) {
			throw new IllegalArgumentException("a " + data.byteSize() + "-byte segment is larger than a message");
		}
		int length = (int) data.byteSize();
		int index = take(length);
		MemorySegment.copy(data, 0, buffers, (long) index * settings.messageSize(), length);
		post(index, length);
	}

	/** A free send buffer for {@code length} bytes, waiting up to the send timeout. */
	int take(int length) {
		if (length > settings.messageSize()) {
			throw new IllegalArgumentException("a message of " + length + " bytes is larger than rdma.connections."
					+ settings.name() + ".message-size (" + settings.messageSize() + ")");
		}
		if (peer.state() != ConnectionState.ESTABLISHED) {
			throw peer.notEstablished();
		}
		int index = pool.tryAcquire();
		if (index >= 0) {
			return index;
		}
		counters.sendQueueFull.increment();
		try {
			index = pool.acquire(timeoutNanos);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			throw new SendQueueFullException(
					"interrupted while waiting for a send buffer of connection '" + settings.name() + "'");
		}
		if (index < 0) {
			if (peer.state() != ConnectionState.ESTABLISHED) {
				throw peer.notEstablished();
			}
			throw new SendQueueFullException("all " + settings.sendDepth() + " send buffers of connection '"
					+ settings.name() + "' are still in flight after rdma.connections." + settings.name()
					+ ".send-timeout (" + settings.sendTimeout() + ")");
		}
		return index;
	}

	private void post(int index, int length) {
		lengths[index] = length;
		SendWorkRequest wr = requests[index].wrId(PeerConnection.SEND | index)
			.buffer(region, (long) index * settings.messageSize(), length)
			.opcode(QueuePair.SendOpcode.SEND);
		boolean inlined = length <= inline;
		postLock.lock();
		try {
			boolean signaled = sinceSignaled + 1 >= signalInterval || pool.available() == 0;
			wr.flags(signaled ? (inlined ? SIGNALED_INLINE : SIGNALED) : (inlined ? UNSIGNALED_INLINE : UNSIGNALED));
			postInOrder(wr, index, signaled);
		}
		catch (RuntimeException ex) {
			pool.release(index);
			if (peer.state() != ConnectionState.ESTABLISHED) {
				throw peer.notEstablished();
			}
			throw ex;
		}
		finally {
			postLock.unlock();
		}
	}

	/**
	 * Records the post of buffer {@code entry} in the ring and posts {@code wr}; with
	 * postLock held. A refused post is taken back out of the ring (nothing later was
	 * numbered: the lock is held).
	 */
	private void postInOrder(SendWorkRequest wr, int entry, boolean signaled) {
		long sequence = posted++;
		ring.set((int) (sequence % ring.length()), entry);
		sequenceOf.set(entry & ~ONE_SIDED_ENTRY, sequence);
		try {
			qp.postSend(wr);
		}
		catch (RuntimeException ex) {
			posted--;
			throw ex;
		}
		sinceSignaled = signaled ? 0 : sinceSignaled + 1;
	}

	/**
	 * Posts the close's marker, a signaled empty SEND, after the QP was moved to the
	 * error state, when the last post was unsignaled: it is flushed, never sent, and its
	 * completion gives back the buffers of the unsignaled SENDs still in the ring (those
	 * that completed have no completion of their own). A signaled last post needs none:
	 * its own completion (or flush) gives everything back. The marker always finds a free
	 * slot: an unsignaled post left a send buffer free, and no more posts come, so fewer
	 * than {@code send-depth} work requests hold the send queue. False when no marker was
	 * needed or the post was refused.
	 */
	boolean postMarker() {
		postLock.lock();
		try {
			if (sinceSignaled == 0 || pool.inFlight() == 0) {
				return false;
			}
			postInOrder(marker, markerIndex, true);
			return true;
		}
		catch (RuntimeException ex) {
			logger.debug("The close marker of connection '" + settings.name() + "' was refused: " + ex.getMessage());
			return false;
		}
		finally {
			postLock.unlock();
		}
	}

	/**
	 * Posts an RDMA WRITE or READ of {@code length} bytes of buffer {@code index} to
	 * {@code remoteAddress} with {@code wrId}; the buffer is not released on failure (the
	 * caller does, after its own clean-up).
	 */
	void postOneSided(int index, long wrId, int length, QueuePair.SendOpcode opcode, long remoteAddress, int rkey) {
		lengths[index] = length;
		SendWorkRequest wr = requests[index].wrId(wrId)
			.buffer(region, (long) index * settings.messageSize(), length)
			.opcode(opcode)
			.remote(remoteAddress, rkey)
			.flags(SIGNALED);
		postLock.lock();
		try {
			postInOrder(wr, ONE_SIDED_ENTRY | index, true);
		}
		finally {
			postLock.unlock();
		}
	}

	/**
	 * A completion of buffer {@code index} (an RDMA operation's too, before
	 * {@link PeerOneSided} handles it): gives back, as sent, the buffers of the
	 * unsignaled SENDs posted before it. Poller thread.
	 */
	void completedBefore(int index) {
		long sequence = sequenceOf.get(index);
		while (reclaimed < sequence) {
			int entry = ring.get((int) (reclaimed % ring.length()));
			reclaimed++;
			if ((entry & ONE_SIDED_ENTRY) == 0 && entry != markerIndex) {
				finished(entry, 0);
			}
		}
		if (reclaimed == sequence) {
			reclaimed++;
		}
	}

	/**
	 * The completion of the SEND of buffer {@code index} (or of the close's marker):
	 * gives back the unsignaled SENDs before it, then frees its buffer.
	 */
	void completed(int index, int status) {
		completedBefore(index);
		if (index != markerIndex) {
			finished(index, status);
		}
	}

	private void finished(int index, int status) {
		if (status == 0) {
			counters.messagesSent.increment();
			counters.bytesSent.add(lengths[index]);
		}
		else {
			counters.sendErrors.increment();
			if (!peer.isClosing() && !peer.peerHasDisconnected() && status != WcStatus.WR_FLUSH_ERR.code()) {
				logger.warn("Send of " + lengths[index] + " bytes on connection '" + settings.name() + "' (" + peer
						+ ") failed: " + WcStatus.of(status));
			}
			peer.completionFailed(status);
		}
		pool.release(index);
	}

}
