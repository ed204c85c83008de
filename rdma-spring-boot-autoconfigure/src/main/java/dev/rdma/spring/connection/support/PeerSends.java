package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;

import org.jspecify.annotations.Nullable;

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
 * work request needs no lock of its own. Posting goes through the {@link SendSequencer}:
 * a place in the send order claimed with an atomic, one thread posting whatever is ready
 * as one chain. {@link BorrowedSendBuffer} lends a buffer to the application (zero copy),
 * {@link PeerSendBatch} posts several with one doorbell.
 *
 * <p>
 * <b>Inline and selective signaling</b> ({@link ConnectionSettings.DataPath}). A SEND of
 * at most the QP's granted {@code max_inline_data} is posted IBV_SEND_INLINE. One SEND in
 * {@code signal-interval} is posted signaled, and so is a SEND that takes the last free
 * buffer while no signaled SEND or WRITE is in flight (a waiting sender always has a
 * completion to wait for, and a stream that keeps every buffer in flight is not signaled
 * once per message); RDMA WRITEs count in the same interval and are inlined by the same
 * rule; of the READs posted together only the last is signaled. Each post has a sequence
 * number (its place in the sequencer's ring); a completion completes in order the
 * unsignaled ones posted before it ({@link SendCompletions}). A close with sends in
 * flight and a signal interval above 1 posts a signaled marker after moving the QP to the
 * error state: its flushed completion gives back whatever is left.
 */
final class PeerSends extends PeerPart implements SendSequencer.Sink {

	private final QueuePair qp;

	private final MemoryRegion region;

	private final MemorySegment buffers;

	private final ByteBuffer view;

	private final SendBufferPool pool;

	private final int[] lengths;

	private final SendWorkRequest[] requests;

	private final long timeoutNanos;

	private static final SendWorkRequest.Flag[] UNSIGNALED = {};

	private static final SendWorkRequest.Flag[] SIGNALED = { SendWorkRequest.Flag.SIGNALED };

	private static final SendWorkRequest.Flag[] UNSIGNALED_INLINE = { SendWorkRequest.Flag.INLINE };

	private static final SendWorkRequest.Flag[] SIGNALED_INLINE = { SendWorkRequest.Flag.SIGNALED,
			SendWorkRequest.Flag.INLINE };

	/** The send order and its posting. */
	private final SendSequencer sequencer;

	/** The posts of chains on the QP. */
	private final ChainPosts chains;

	/** The wr_id of each buffer's RDMA operation (for a refused one). */
	private final long[] oneSidedWrIds;

	/** Receives refused RDMA operations (set once the one-sided part exists). */
	private @Nullable PeerOneSided oneSided;

	/** One lending handle per buffer (zero copy). */
	private final BorrowedSendBuffer[] lent;

	/**
	 * Buffers taken from the pool and held by the application (borrowed, or added to a
	 * batch not sent yet): not in flight for a close.
	 */
	private final AtomicInteger held = new AtomicInteger();

	/** The sequence number of the last post of each buffer index (marker included). */
	private final AtomicLongArray sequenceOf;

	/** The poller's side: completions reclaim the places in order. */
	private final SendCompletions completions;

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
		this.sequenceOf = new AtomicLongArray(settings.sendDepth() + 1);
		this.inline = Math.min(qp.maxInlineData(), settings.dataPath().maxInlineData() == 0 ? 0 : Integer.MAX_VALUE);
		this.signalInterval = settings.dataPath().signalInterval();
		this.chains = new ChainPosts(peer, settings, counters, qp);
		this.sequencer = new SendSequencer(settings.sendDepth() + 1, settings.sendDepth() + 1, signalInterval, counters,
				this);
		this.oneSidedWrIds = new long[settings.sendDepth()];
		this.completions = new SendCompletions(peer, settings, counters, sequencer, pool, sequenceOf, lengths,
				oneSidedWrIds);
		this.lent = new BorrowedSendBuffer[settings.sendDepth()];
		for (int i = 0; i < lent.length; i++) {
			lent[i] = new BorrowedSendBuffer(this, i, buffers.asSlice((long) i * size, size));
		}
	}

	/** The one-sided part, which completes refused RDMA operations. */
	void oneSided(PeerOneSided part) {
		this.oneSided = part;
		completions.oneSided(part);
	}

	/** The completions of the send queue's work requests (poller thread). */
	SendCompletions completions() {
		return completions;
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

	/** A ByteBuffer view of the send buffers (absolute puts only). */
	ByteBuffer view() {
		return view;
	}

	SendBufferPool pool() {
		return pool;
	}

	long timeoutNanos() {
		return timeoutNanos;
	}

	/**
	 * Buffers in flight for a close: taken from the pool and not held by the application
	 * (borrowed, or in a batch not sent yet).
	 */
	int inFlight() {
		return pool.inFlight() - held.get();
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
		int index = tryTake(length);
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

	/** A free send buffer for {@code length} bytes, or -1 when none is free now. */
	private int tryTake(int length) {
		if (length > settings.messageSize()) {
			throw new IllegalArgumentException("a message of " + length + " bytes is larger than rdma.connections."
					+ settings.name() + ".message-size (" + settings.messageSize() + ")");
		}
		if (peer.state() != ConnectionState.ESTABLISHED) {
			throw peer.notEstablished();
		}
		return pool.tryAcquire();
	}

	/**
	 * Posts buffer {@code index}'s SEND of {@code length} bytes (hand-off, see class).
	 */
	private void post(int index, int length) {
		prepare(index, length);
		long sequence = sequencer.claim(1);
		publish(sequence, index);
		sequencer.drive();
	}

	/** Sets buffer {@code index}'s SEND of {@code length} bytes (before its claim). */
	private void prepare(int index, int length) {
		lengths[index] = length;
		requests[index].wrId(PeerConnection.SEND | index)
			.buffer(region, (long) index * settings.messageSize(), length)
			.opcode(QueuePair.SendOpcode.SEND);
	}

	/** Records place {@code sequence} of {@code entry} and publishes it. */
	private void publish(long sequence, int entry) {
		sequenceOf.set(entry & SendSequencer.INDEX, sequence);
		sequencer.publish(sequence, entry);
	}

	// ------------------------------------------------------------------ lending

	/** Lends a free buffer to the application (see {@link BorrowedSendBuffer}). */
	BorrowedSendBuffer borrow() {
		int index = takeHeld(0);
		BorrowedSendBuffer buffer = lent[index];
		buffer.lend();
		return buffer;
	}

	/** A free buffer for {@code length} bytes, held by the application. */
	int takeHeld(int length) {
		int index = take(length);
		held.incrementAndGet();
		return index;
	}

	/**
	 * A free buffer for {@code length} bytes, held by the application, or -1 when none is
	 * free now.
	 */
	int tryTakeHeld(int length) {
		int index = tryTake(length);
		if (index >= 0) {
			held.incrementAndGet();
		}
		return index;
	}

	/** Gives back a held buffer that was not sent. */
	void giveBack(int index) {
		held.decrementAndGet();
		pool.release(index);
	}

	/** Sends {@code length} bytes of held buffer {@code index} (a borrowed one). */
	void sendHeld(int index, int length) {
		if (peer.state() != ConnectionState.ESTABLISHED) {
			giveBack(index);
			throw peer.notEstablished();
		}
		released();
		post(index, length);
	}

	/** A held buffer is about to be posted: no longer the application's. */
	void released() {
		held.decrementAndGet();
	}

	/**
	 * Posts held buffers {@code indexes[0..count)} of {@code sizes} as consecutive
	 * {@link SendSequencer#OWNED} places (a batch); the first one's sequence number. The
	 * caller awaits each one's outcome ({@link #refused(int, long)}).
	 */
	long postHeld(int[] indexes, int[] sizes, int count) {
		if (peer.state() != ConnectionState.ESTABLISHED) {
			for (int i = 0; i < count; i++) {
				giveBack(indexes[i]);
			}
			throw peer.notEstablished();
		}
		for (int i = 0; i < count; i++) {
			prepare(indexes[i], sizes[i]);
		}
		long first = sequencer.claim(count);
		held.addAndGet(-count);
		for (int i = 0; i < count; i++) {
			publish(first + i, indexes[i] | SendSequencer.OWNED);
		}
		sequencer.drive();
		return first;
	}

	/**
	 * Waits for the outcome of the batch's place {@code sequence} of buffer
	 * {@code index}; a refused one is counted and given back (true).
	 */
	boolean refused(int index, long sequence) {
		if (!sequencer.awaitOutcome(index, sequence)) {
			return false;
		}
		counters.sendErrors.increment();
		counters.sendsRefused.increment();
		pool.release(index);
		return true;
	}

	/** The provider's last refusal, or null. */
	@Nullable RuntimeException lastRefusal() {
		return chains.lastRefusal();
	}

	/** The lending handle of buffer {@code index}. */
	BorrowedSendBuffer lent(int index) {
		return lent[index];
	}

	// ------------------------------------------------------------------
	// SendSequencer.Sink

	@Override
	public SendWorkRequest prepare(int entry, boolean signalDue, boolean signaledInFlight) {
		int index = entry & SendSequencer.INDEX;
		if (index == markerIndex) {
			return marker;
		}
		SendWorkRequest wr = requests[index];
		if ((entry & SendSequencer.ONE_SIDED) != 0 && (oneSidedWrIds[index] & PeerConnection.READ) != 0) {
			return wr; // a READ: flags set by prepareOneSided and postOneSided
		}
		boolean signaled = signalDue || (!signaledInFlight && pool.available() == 0);
		boolean inlined = lengths[index] <= inline;
		return wr.flags(signaled ? (inlined ? SIGNALED_INLINE : SIGNALED) : (inlined ? UNSIGNALED_INLINE : UNSIGNALED));
	}

	@Override
	public int post(ArrayList<SendWorkRequest> chain) {
		return chains.post(chain);
	}

	@Override
	public void refused(int entry) {
		int index = entry & SendSequencer.INDEX;
		if (index == markerIndex) {
			return;
		}
		counters.sendsRefused.increment();
		PeerOneSided part = oneSided;
		if ((entry & SendSequencer.ONE_SIDED) != 0 && part != null) {
			// ends as a flushed RDMA operation would: counted, its reader told
			part.completed(oneSidedWrIds[index], WcStatus.WR_FLUSH_ERR.code());
			return;
		}
		counters.sendErrors.increment();
		pool.release(index);
	}

	// ------------------------------------------------------------------ marker,
	// one-sided

	/**
	 * Posts the close's marker, a signaled empty SEND, after the QP was moved to the
	 * error state, when sends may have completed unsignaled: it is flushed, never sent,
	 * and its completion gives back the buffers of the unsignaled SENDs still in the ring
	 * (those that completed have no completion of their own). The marker always finds a
	 * free slot in the send queue: it has one more than there are send buffers. False
	 * when no marker was needed.
	 */
	boolean postMarker() {
		if (signalInterval == 1 || inFlight() == 0) {
			return false;
		}
		long sequence = sequencer.claim(1);
		publish(sequence, markerIndex);
		sequencer.drive();
		return true;
	}

	/**
	 * Fills buffer {@code index}'s work request for an RDMA WRITE or READ, signaled (a
	 * WRITE's flags are then the posting thread's, as a SEND's: {@link #prepare}).
	 */
	void prepareOneSided(int index, long wrId, int length, QueuePair.SendOpcode opcode, long remoteAddress, int rkey) {
		lengths[index] = length;
		oneSidedWrIds[index] = wrId;
		requests[index].wrId(wrId)
			.buffer(region, (long) index * settings.messageSize(), length)
			.opcode(opcode)
			.remote(remoteAddress, rkey)
			.flags(SIGNALED);
	}

	/**
	 * Posts {@code count} RDMA operations prepared with {@link #prepareOneSided} as
	 * consecutive places of the send order (one chain unless another thread posts too):
	 * {@code first}, {@code next[first]}, ..., all but the last unsignaled (READs of a
	 * group). A refused one completes as flushed ({@link PeerOneSided#completed}).
	 */
	void postOneSided(int first, int[] next, int count) {
		long sequence = sequencer.claim(count);
		for (int i = 0, index = first; i < count; i++, index = next[index]) {
			if (i < count - 1) {
				requests[index].flags(UNSIGNALED);
			}
			publish(sequence + i, SendSequencer.ONE_SIDED | index);
		}
		sequencer.drive();
	}

}
