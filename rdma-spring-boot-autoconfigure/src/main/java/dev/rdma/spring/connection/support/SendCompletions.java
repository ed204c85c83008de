package dev.rdma.spring.connection.support;

import java.util.concurrent.atomic.AtomicLongArray;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.WcStatus;

/**
 * The send queue's completions of a {@link PeerSends}, on its poller: a completion
 * (signaled, or failed: the provider reports every failed and flushed work request)
 * reclaims, in post order, the places of the {@link SendSequencer} up to its own. The
 * unsignaled SENDs before it are counted as sent (flushed, when it is a flush: the first
 * failure had its own completion), RDMA operations are handed to {@link PeerOneSided},
 * and the SENDs' buffers, its own included, go back to the {@link SendBufferPool}
 * together: one hand-over wakes a waiting sender once, not once per buffer. The sequencer
 * learns the reclaimed place before any buffer is given back: its rule that a post taking
 * the last free buffer is signaled only when no signaled SEND or WRITE is in flight
 * relies on it. Poller thread only; nothing is allocated.
 */
final class SendCompletions extends PeerPart {

	private final SendSequencer sequencer;

	private final SendBufferPool pool;

	/** The sequence number of the last post of each buffer index (marker included). */
	private final AtomicLongArray sequenceOf;

	/** The length last posted from each buffer (the send path's array). */
	private final int[] lengths;

	/** The wr_id of each buffer's RDMA operation (the send path's array). */
	private final long[] oneSidedWrIds;

	private final int markerIndex;

	private @Nullable PeerOneSided oneSided;

	/** The next sequence number to give back. */
	private long reclaimed;

	/** SEND buffers reclaimed by one completion, given back together. */
	private final int[] freed;

	private int freedCount;

	SendCompletions(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters,
			SendSequencer sequencer, SendBufferPool pool, AtomicLongArray sequenceOf, int[] lengths,
			long[] oneSidedWrIds) {
		super(peer, settings, counters);
		this.sequencer = sequencer;
		this.pool = pool;
		this.sequenceOf = sequenceOf;
		this.lengths = lengths;
		this.oneSidedWrIds = oneSidedWrIds;
		this.markerIndex = settings.sendDepth();
		this.freed = new int[settings.sendDepth()];
	}

	/** The one-sided part, which completes RDMA operations (set once it exists). */
	void oneSided(PeerOneSided part) {
		this.oneSided = part;
	}

	/**
	 * A completion of buffer {@code index} with {@code status} (an RDMA operation's,
	 * before {@link PeerOneSided} handles it): completes what was posted before it.
	 */
	void completedBefore(int index, int status) {
		reclaimBefore(index, status);
		releaseFreed();
	}

	/**
	 * The completion of the SEND of buffer {@code index} (or of the close's marker):
	 * completes what was posted before it, then the SEND itself.
	 */
	void completed(int index, int status) {
		reclaimBefore(index, status);
		if (index != markerIndex) {
			finished(index, status);
		}
		releaseFreed();
	}

	/**
	 * Reclaims the places before buffer {@code index}'s and its own, then tells the
	 * sequencer (before any SEND's buffer is given back).
	 */
	private void reclaimBefore(int index, int status) {
		long sequence = sequenceOf.get(index);
		PeerOneSided part = oneSided;
		while (reclaimed < sequence) {
			int entry = sequencer.entry(reclaimed);
			reclaimed++;
			int unsignaled = entry & SendSequencer.INDEX;
			if ((entry & SendSequencer.REFUSED) != 0 || unsignaled == markerIndex) {
				continue;
			}
			if ((entry & SendSequencer.ONE_SIDED) == 0) {
				finished(unsignaled, 0);
			}
			else if (part != null) {
				part.completedUnsignaled(oneSidedWrIds[unsignaled], status);
			}
		}
		if (reclaimed == sequence) {
			reclaimed++;
		}
		sequencer.reclaimed(reclaimed);
	}

	/** Counts the SEND of buffer {@code index} as sent or failed; collects its buffer. */
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
		freed[freedCount++] = index;
	}

	private void releaseFreed() {
		if (freedCount > 0) {
			pool.release(freed, freedCount);
			freedCount = 0;
		}
	}

}
