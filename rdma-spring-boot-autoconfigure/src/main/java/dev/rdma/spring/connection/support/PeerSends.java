package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

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
		try {
			qp.postSend(requests[index].wrId(PeerConnection.SEND | index)
				.buffer(region, (long) index * settings.messageSize(), length)
				.opcode(QueuePair.SendOpcode.SEND));
		}
		catch (RuntimeException ex) {
			pool.release(index);
			if (peer.state() != ConnectionState.ESTABLISHED) {
				throw peer.notEstablished();
			}
			throw ex;
		}
	}

	/**
	 * Posts an RDMA WRITE or READ of {@code length} bytes of buffer {@code index} to
	 * {@code remoteAddress} with {@code wrId}; the buffer is not released on failure (the
	 * caller does, after its own clean-up).
	 */
	void postOneSided(int index, long wrId, int length, QueuePair.SendOpcode opcode, long remoteAddress, int rkey) {
		lengths[index] = length;
		qp.postSend(requests[index].wrId(wrId)
			.buffer(region, (long) index * settings.messageSize(), length)
			.opcode(opcode)
			.remote(remoteAddress, rkey));
	}

	/** The completion of the SEND of buffer {@code index}; frees the buffer. */
	void completed(int index, int status) {
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
