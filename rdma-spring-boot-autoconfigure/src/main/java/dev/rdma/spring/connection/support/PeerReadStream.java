package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ReadStream;

/**
 * A {@link ReadStream}: a ring of the send-buffer indices of its READs, oldest first: the
 * {@link #posted} ones, then the {@link #pending} ones prepared and not posted yet, with
 * each posted one's deadline; arrays of {@code window} made once.
 *
 * <p>
 * READs go out and come back in groups of {@link #group} ({@code window / 4}, at least
 * 1): pending READs are posted as one chain (one doorbell) once a group is pending, or at
 * once when none of the stream's READs is posted (the adapter never waits for a group to
 * fill); a full window reaps a group, waiting only for the group's last READ (READs
 * complete in the order posted), so the reader is woken about once per group, not once
 * per READ. The {@link PeerOneSided} it works through is the one of the connection its
 * {@link dev.rdma.spring.connection.RdmaConnection} sends to when a READ is submitted
 * with nothing in flight.
 */
final class PeerReadStream implements ReadStream {

	private final Supplier<PeerConnection> target;

	private final String connection;

	private final int messageSize;

	/** Buffer indices from {@link #head}: {@link #posted}, then {@link #pending}. */
	private final int[] ring;

	private final long[] deadlines;

	/** READs posted or reaped together. */
	private final int group;

	private int head;

	private int posted;

	private int pending;

	private long completed;

	/** The connection's one-sided part while READs are in flight. */
	private @Nullable PeerOneSided part;

	/** Failed READs not thrown for yet; the first's status and length. */
	private int failures;

	private int failedStatus;

	private int failedLength;

	/**
	 * READs reaped from the first failure on (the n of "k of n": the failed one and those
	 * in flight with it).
	 */
	private int reaped;

	PeerReadStream(Supplier<PeerConnection> target, ConnectionSettings settings, int window) {
		if (window < 1 || window > settings.sendDepth()) {
			throw new IllegalArgumentException("the window of a ReadStream of connection '" + settings.name()
					+ "' must be 1 to send-depth (" + settings.sendDepth() + "), not " + window);
		}
		this.target = target;
		this.connection = settings.name();
		this.messageSize = settings.messageSize();
		this.ring = new int[window];
		this.deadlines = new long[window];
		this.group = Math.max(1, window / 4);
	}

	@Override
	public long submit(long remoteOffset, MemorySegment into) {
		PeerReadBatch.checkTarget(into, messageSize, connection, "a stream");
		PeerOneSided oneSided = part;
		if (oneSided == null || (posted + pending == 0 && failures == 0)) {
			// (re)bound with nothing in flight: a client's current connection
			oneSided = target.get().oneSided();
			oneSided.requireReader();
			part = oneSided;
		}
		if (posted + pending == ring.length) {
			postPending(oneSided);
			reapGroup(oneSided);
		}
		if (failures == 0) {
			int index = oneSided.prepareRead(remoteOffset, into, false);
			while (index < 0 && posted + pending > 0 && failures == 0) {
				// no free buffer: its own oldest READs give some back
				postPending(oneSided);
				reapGroup(oneSided);
				index = oneSided.prepareRead(remoteOffset, into, false);
			}
			if (index < 0 && failures == 0) {
				// nothing in flight: wait for a buffer
				index = oneSided.prepareRead(remoteOffset, into, true);
			}
			if (index >= 0) {
				ring[(head + posted + pending) % ring.length] = index;
				pending++;
				if (pending >= group || posted == 0) {
					postPending(oneSided);
				}
			}
		}
		if (failures > 0) {
			throw drainAndFail(oneSided);
		}
		return completed;
	}

	@Override
	public long flush() {
		PeerOneSided oneSided = part;
		if (oneSided == null) {
			return completed;
		}
		postPending(oneSided);
		while (posted > 0) {
			reapGroup(oneSided);
		}
		part = null;
		if (failures > 0) {
			throw drainAndFail(oneSided);
		}
		return completed;
	}

	/** Posts the pending READs as one chain; on a refusal they are gone (not posted). */
	private void postPending(PeerOneSided oneSided) {
		if (pending == 0) {
			return;
		}
		int from = (head + posted) % ring.length;
		int n = pending;
		pending = 0;
		oneSided.postReads(ring, from, n); // throws when no longer established
		long deadline = System.nanoTime() + oneSided.readTimeoutNanos();
		for (int i = 0; i < n; i++) {
			deadlines[(from + i) % ring.length] = deadline;
		}
		posted += n;
	}

	/** Waits for everything posted, then the exception for the failures seen. */
	private RuntimeException drainAndFail(PeerOneSided oneSided) {
		for (; pending > 0; pending--) {
			oneSided.releaseRead(ring[(head + posted + pending - 1) % ring.length]);
		}
		while (posted > 0) {
			reapGroup(oneSided);
		}
		part = null;
		RuntimeException failed = oneSided.readFailed(failures, reaped, "of a stream", failedLength, failedStatus);
		failures = 0;
		return failed;
	}

	/**
	 * Reaps the oldest {@link #group} posted READs (or all posted, when fewer): waits for
	 * the last of them, then takes each in order.
	 */
	private void reapGroup(PeerOneSided oneSided) {
		int n = Math.min(group, posted);
		if (n == 0) {
			return;
		}
		int last = (head + n - 1) % ring.length;
		oneSided.awaitDone(ring[last], deadlines[last]);
		for (int i = 0; i < n; i++) {
			reapOldest(oneSided);
		}
	}

	private void reapOldest(PeerOneSided oneSided) {
		int index = ring[head];
		long deadline = deadlines[head];
		head = (head + 1) % ring.length;
		posted--;
		int length = oneSided.sendLength(index);
		int status = oneSided.reap(index, deadline);
		if (status == 0) {
			completed++;
		}
		else if (failures++ == 0) {
			failedStatus = status;
			failedLength = length;
			reaped = 0;
		}
		reaped++;
	}

	@Override
	public long completed() {
		return completed;
	}

	@Override
	public int inFlight() {
		return posted + pending;
	}

	@Override
	public int window() {
		return ring.length;
	}

	@Override
	public void close() {
		flush();
	}

	@Override
	public String toString() {
		return "ReadStream[connection '" + connection + "', " + inFlight() + " of " + ring.length + " in flight, "
				+ completed + " completed]";
	}

}
