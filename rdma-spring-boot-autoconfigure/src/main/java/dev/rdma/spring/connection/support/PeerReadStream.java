package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ReadStream;

/**
 * A {@link ReadStream}: a ring of the send-buffer indices of the READs in flight, oldest
 * first, each with its deadline, in arrays of {@code window} made once. The
 * {@link PeerOneSided} it posts through is the one of the connection its
 * {@link dev.rdma.spring.connection.RdmaConnection} sends to when a READ is submitted
 * with nothing in flight.
 */
final class PeerReadStream implements ReadStream {

	private final Supplier<PeerConnection> target;

	private final String connection;

	private final int messageSize;

	/** Buffer indices in flight, from {@link #head}; {@link #inFlight} of them. */
	private final int[] ring;

	private final long[] deadlines;

	private int head;

	private int inFlight;

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
	}

	@Override
	public long submit(long remoteOffset, MemorySegment into) {
		if (into.isReadOnly()) {
			throw new IllegalArgumentException("the target of an RDMA READ must be writable");
		}
		if (into.byteSize() > messageSize) {
			throw new IllegalArgumentException("an RDMA READ of " + into.byteSize()
					+ " bytes in a stream is larger than rdma.connections." + connection + ".message-size ("
					+ messageSize + "): read it with RdmaConnection.read, which reads in chunks");
		}
		PeerOneSided oneSided = part;
		if (inFlight == 0 && failures == 0) {
			// (re)bound with nothing in flight: a client's current connection
			oneSided = target.get().oneSided();
			oneSided.requireReader();
			part = oneSided;
		}
		if (oneSided == null) {
			throw new IllegalStateException("unreachable: READs in flight without a connection");
		}
		if (inFlight == ring.length) {
			reapOldest(oneSided);
		}
		if (failures == 0) {
			int index = oneSided.postRead(remoteOffset, into, false);
			while (index < 0 && inFlight > 0 && failures == 0) {
				reapOldest(oneSided); // no free buffer: its own oldest gives one back
				index = oneSided.postRead(remoteOffset, into, false);
			}
			if (index < 0 && failures == 0) {
				index = oneSided.postRead(remoteOffset, into, true); // nothing in flight
			}
			if (index >= 0) {
				int slot = (head + inFlight) % ring.length;
				ring[slot] = index;
				deadlines[slot] = System.nanoTime() + oneSided.readTimeoutNanos();
				inFlight++;
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
		while (inFlight > 0) {
			reapOldest(oneSided);
		}
		part = null;
		if (failures > 0) {
			throw drainAndFail(oneSided);
		}
		return completed;
	}

	/** Waits for everything in flight, then the exception for the failures seen. */
	private RuntimeException drainAndFail(PeerOneSided oneSided) {
		while (inFlight > 0) {
			reapOldest(oneSided);
		}
		part = null;
		RuntimeException failed = oneSided.readFailed(failures, reaped, "of a stream", failedLength, failedStatus);
		failures = 0;
		return failed;
	}

	private void reapOldest(PeerOneSided oneSided) {
		int index = ring[head];
		long deadline = deadlines[head];
		head = (head + 1) % ring.length;
		inFlight--;
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
		return inFlight;
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
		return "ReadStream[connection '" + connection + "', " + inFlight + " of " + ring.length + " in flight, "
				+ completed + " completed]";
	}

}
