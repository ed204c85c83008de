package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RemoteAccessException;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WcStatus;

/**
 * The one-sided operations of a {@link PeerConnection}: the region the peer may write and
 * read (remote-access-size; its record travels as private data), the peer's region, and
 * RDMA WRITE and READ through the send buffers of {@link PeerSends}, in chunks of
 * {@code message-size}. A write's completion frees its buffer; a READ's is handed to its
 * reader by {@link ReadCompletions}, or frees the buffer of a reader that gave up.
 */
final class PeerOneSided extends PeerPart {

	/** The bits of a wr_id that are the buffer index. */
	static final long INDEX = (1L << 32) - 1;

	private final PeerSends sends;

	private final List<CompletionRouter> routers;

	/** The region the peer may write and read, or null (remote-access-size 0). */
	private final @Nullable MemoryRegion accessRegion;

	/** The peer's region, from its private data; null when it exposes none. */
	private volatile @Nullable RemoteRegion remoteRegion;

	/** Per send buffer: its RDMA READ's completion, handed to the reader. */
	private final ReadCompletions reads;

	private final long readTimeoutNanos;

	/** Per send buffer: the next buffer of its group of READs (owned by the reader). */
	private final int[] groupNext;

	/** Per send buffer: where its READ's bytes go, and from which offset. */
	private final @Nullable MemorySegment[] readTargets;

	private final long[] readTargetOffsets;

	PeerOneSided(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters, PeerSends sends,
			List<CompletionRouter> routers, @Nullable MemoryRegion accessRegion) {
		super(peer, settings, counters);
		this.sends = sends;
		this.routers = routers;
		this.accessRegion = accessRegion;
		this.reads = new ReadCompletions(settings.sendDepth());
		this.groupNext = new int[settings.sendDepth()];
		this.readTargets = new MemorySegment[settings.sendDepth()];
		this.readTargetOffsets = new long[settings.sendDepth()];
		sends.oneSided(this);
		this.readTimeoutNanos = settings.sendTimeout().isZero() ? Deadlines.nanos(settings.connectTimeout())
				: sends.timeoutNanos();
	}

	@Nullable MemoryRegion accessRegion() {
		return accessRegion;
	}

	/**
	 * The private data of this side's rdma_connect or rdma_accept: the record of its
	 * region, or nothing.
	 */
	byte[] privateData() {
		MemoryRegion region = accessRegion;
		return region == null ? new byte[0]
				: new RemoteRegion(region.bufferAddress(), region.rkey(), settings.remoteAccessSize()).encode();
	}

	/**
	 * The peer's region, parsed from the private data of its connect request or accept
	 * (before this connection is established); null when it sent none.
	 */
	void remoteRegion(@Nullable RemoteRegion region) {
		this.remoteRegion = region;
		if (region != null && logger.isDebugEnabled()) {
			logger.debug("Connection '" + settings.name() + "' (" + peer + "): the peer exposes " + region);
		}
	}

	/** The peer's region, or null. */
	@Nullable RemoteRegion remoteRegion() {
		return remoteRegion;
	}

	MemorySegment localRegion() {
		MemoryRegion region = accessRegion;
		if (region == null) {
			throw new IllegalStateException(
					"connection '" + settings.name() + "' has no region the peer can access: rdma.connections."
							+ settings.name() + ".remote-access-size is 0");
		}
		return region.buffer();
	}

	long remoteRegionSize() {
		RemoteRegion region = remoteRegion;
		return region == null ? 0 : region.length();
	}

	void write(long remoteOffset, MemorySegment data) {
		long length = data.byteSize();
		RemoteRegion region = remoteFor("write", remoteOffset, length);
		int chunk = settings.messageSize();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = sends.take(n);
			MemorySegment.copy(data, done, sends.buffers(), (long) index * chunk, n);
			postWrite(index, n, region, remoteOffset + done);
		}
	}

	void write(long remoteOffset, byte[] data, int offset, int length) {
		java.util.Objects.checkFromIndexSize(offset, length, data.length);
		RemoteRegion region = remoteFor("write", remoteOffset, length);
		int chunk = settings.messageSize();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = sends.take(n);
			MemorySegment.copy(data, offset + (int) done, sends.buffers(), ValueLayout.JAVA_BYTE, (long) index * chunk,
					n);
			postWrite(index, n, region, remoteOffset + done);
		}
	}

	void read(long remoteOffset, MemorySegment target) {
		requireWritable(target);
		long length = target.byteSize();
		RemoteRegion region = remoteFor("read", remoteOffset, length);
		requireNotPoller();
		int chunk = settings.messageSize();
		readAll(region, null, null, (int) ((length + chunk - 1) / chunk), remoteOffset, target);
	}

	/**
	 * The READs of a batch: {@code count} entries of {@code offsets} and {@code targets},
	 * each at most {@code message-size} bytes (see {@link PeerReadBatch}).
	 */
	void read(long[] offsets, MemorySegment[] targets, int count) {
		RemoteRegion region = remoteFor("read", 0, 0);
		for (int i = 0; i < count; i++) {
			remoteFor("read", offsets[i], targets[i].byteSize());
		}
		requireNotPoller();
		readAll(region, offsets, targets, count, 0, MemorySegment.NULL);
	}

	private void requireWritable(MemorySegment target) {
		if (target.isReadOnly()) {
			throw new IllegalArgumentException("the target of an RDMA READ must be writable");
		}
	}

	private void requireNotPoller() {
		Thread me = Thread.currentThread();
		for (int i = 0; i < routers.size(); i++) {
			CompletionRouter router = routers.get(i);
			if (router.queue().equals(settings.sendQueue()) && router.isPoller(me)) {
				throw new IllegalStateException("RDMA READ on connection '" + settings.name() + "' called on thread "
						+ me.getName() + ", the poller of its send queue '" + settings.sendQueue()
						+ "': it would wait for a completion only this thread delivers; read from another thread");
			}
		}
	}

	/**
	 * Reads {@code count} pieces, group by group: a group is as many pieces as there are
	 * send buffers to take (waiting only for the first one: a thread never waits for a
	 * buffer while holding others, so two readers cannot starve each other), posted as
	 * consecutive places of the send order (one doorbell when no other thread posts
	 * meanwhile), then awaited, copied out and given back. Piece {@code i} is entry
	 * {@code i} of a batch's {@code offsets} and {@code targets}, or else (both null)
	 * chunk {@code i} ({@code message-size} bytes) of the read of {@code target} at
	 * {@code remoteOffset}.
	 */
	private void readAll(RemoteRegion region, long @Nullable [] offsets, MemorySegment @Nullable [] targets, int count,
			long remoteOffset, MemorySegment target) {
		int chunk = settings.messageSize();
		SendBufferPool pool = sends.pool();
		int done = 0;
		while (done < count) {
			int first = -1;
			int last = -1;
			int n = 0;
			try {
				while (done + n < count && n < groupNext.length) {
					int piece = done + n;
					MemorySegment into = targets != null ? targets[piece] : target;
					int length = (int) (targets != null ? into.byteSize()
							: Math.min(chunk, target.byteSize() - (long) piece * chunk));
					int index = n == 0 ? sends.take(length) : pool.tryAcquire();
					if (index < 0) {
						break;
					}
					prepare(index, into, targets != null ? 0 : (long) piece * chunk, length, region,
							offsets != null ? offsets[piece] : remoteOffset + (long) piece * chunk);
					if (n == 0) {
						first = index;
					}
					else {
						groupNext[last] = index;
					}
					last = index;
					n++;
				}
			}
			catch (RuntimeException ex) {
				releaseGroup(first, n);
				throw ex;
			}
			postGroup(first, n);
			awaitGroup(first, n);
			done += n;
		}
	}

	/**
	 * Sets send buffer {@code index}'s READ of {@code length} bytes at
	 * {@code remoteOffset} of the peer's region, which goes to {@code into} at
	 * {@code targetOffset} once it completed.
	 */
	private void prepare(int index, MemorySegment into, long targetOffset, int length, RemoteRegion region,
			long remoteOffset) {
		readTargets[index] = into;
		readTargetOffsets[index] = targetOffset;
		sends.prepareOneSided(index, PeerConnection.SEND | PeerConnection.ONE_SIDED | PeerConnection.READ | index,
				length, QueuePair.SendOpcode.RDMA_READ, region.address() + remoteOffset, region.rkey());
	}

	/**
	 * Posts the {@code n} prepared READs linked from {@code first} through
	 * {@link #groupNext} as consecutive places of the send order, only the last one
	 * signaled (its completion completes the others: perftest's CQ moderation, one
	 * completion per group instead of one per READ); when the connection is no longer
	 * established their buffers go back and it throws. A provider refusing a chain in its
	 * middle (a queue pair already failing) leaves the READs posted before that element
	 * with no signaled one after them: their reader waits for them up to its deadline.
	 */
	private void postGroup(int first, int n) {
		if (peer.state() != ConnectionState.ESTABLISHED) {
			releaseGroup(first, n);
			throw peer.notEstablished();
		}
		for (int i = 0, index = first; i < n; i++, index = groupNext[index]) {
			reads.begin(index);
		}
		sends.postOneSided(first, groupNext, n);
	}

	private void releaseGroup(int first, int n) {
		for (int i = 0, index = first; i < n; i++) {
			// the link first: once released, the buffer may be another reader's, which
			// links it into its own group
			int next = groupNext[index];
			readTargets[index] = null;
			sends.pool().release(index);
			index = next;
		}
	}

	/**
	 * Waits for the READs of a group (one deadline for all), copies what arrived into the
	 * targets and gives their buffers back; throws for the first that failed or did not
	 * complete, once all were waited for.
	 */
	private void awaitGroup(int first, int n) {
		long deadline = System.nanoTime() + readTimeoutNanos;
		int failedLength = -1;
		int failedStatus = 0;
		int failures = 0;
		for (int i = 0, index = first; i < n; i++) {
			int next = groupNext[index];
			int length = sends.length(index);
			int status = reap(index, deadline);
			if (status != 0 && failures++ == 0) {
				failedStatus = status;
				failedLength = length;
			}
			index = next;
		}
		if (failures > 0) {
			throw readFailed(failures, n, "posted together", failedLength, failedStatus);
		}
	}

	// ------------------------------------------------------------------ a ReadStream's

	/**
	 * Before a stream's READs: the connection is established and this is not the send
	 * queue's poller thread.
	 */
	void requireReader() {
		if (peer.state() != ConnectionState.ESTABLISHED) {
			throw peer.notEstablished();
		}
		requireNotPoller();
	}

	/**
	 * Prepares one READ of a {@link PeerReadStream} of {@code target.byteSize()} bytes
	 * (at most {@code message-size}) at {@code remoteOffset} in a free send buffer,
	 * waiting up to the send timeout for one only when {@code mayWait};
	 * {@link #postReads} posts it, {@link #reap} reaps it. Returns the buffer's index, or
	 * -1 when none is free and it may not wait.
	 */
	int prepareRead(long remoteOffset, MemorySegment target, boolean mayWait) {
		int length = (int) target.byteSize();
		RemoteRegion region = remoteFor("read", remoteOffset, length);
		int index = mayWait ? sends.take(length) : sends.pool().tryAcquire();
		if (index < 0) {
			return -1;
		}
		prepare(index, target, 0, length, region, remoteOffset);
		return index;
	}

	/**
	 * Posts {@code count} READs prepared by {@link #prepareRead}, the buffer indices at
	 * {@code ring[from]} onwards (wrapping around), as consecutive places of the send
	 * order (one chain). When the connection is no longer established their buffers go
	 * back and it throws.
	 */
	void postReads(int[] ring, int from, int count) {
		int first = ring[from];
		for (int i = 1, last = first; i < count; i++) {
			int index = ring[(from + i) % ring.length];
			groupNext[last] = index;
			last = index;
		}
		postGroup(first, count);
	}

	/**
	 * Gives back the buffer of a READ prepared by {@link #prepareRead} and not posted.
	 */
	void releaseRead(int index) {
		releaseGroup(index, 1);
	}

	/**
	 * Waits up to {@code deadline} for the READ of buffer {@code index} to complete,
	 * without taking its status (READs complete in the order posted: once this one did,
	 * every READ posted before it did too).
	 */
	void awaitDone(int index, long deadline) {
		reads.awaitDone(index, deadline);
	}

	/** The length of what send buffer {@code index} holds or was posted with. */
	int sendLength(int index) {
		return sends.length(index);
	}

	/** How long a READ may take from its post: send-timeout, or connect-timeout. */
	long readTimeoutNanos() {
		return readTimeoutNanos;
	}

	/**
	 * Waits up to {@code deadline} ({@link System#nanoTime()}) for the READ of buffer
	 * {@code index}, copies its bytes into its target when it succeeded and gives the
	 * buffer back (an abandoned READ keeps it until its completion). Returns the work
	 * completion status, or {@link ReadCompletions#ABANDONED}.
	 */
	int reap(int index, long deadline) {
		int status = reads.await(index, Math.max(0, deadline - System.nanoTime()));
		MemorySegment target = readTargets[index];
		readTargets[index] = null;
		if (status == 0 && target != null) {
			MemorySegment.copy(sends.buffers(), (long) index * settings.messageSize(), target, readTargetOffsets[index],
					sends.length(index));
		}
		if (status != ReadCompletions.ABANDONED) {
			sends.pool().release(index);
		}
		return status;
	}

	/**
	 * The exception for {@code failures} of {@code n} READs (of a group {@code how}) that
	 * failed, the first with {@code status} and {@code length} bytes.
	 */
	RuntimeException readFailed(int failures, int n, String how, int length, int status) {
		String which = (n == 1 ? "RDMA READ of " : failures + " of " + n + " RDMA READs " + how + ", the first of ")
				+ length + " bytes on connection '" + settings.name() + "'";
		if (status == ReadCompletions.ABANDONED) {
			boolean interrupted = Thread.currentThread().isInterrupted();
			return new RemoteAccessException(which + " "
					+ (interrupted ? "interrupted"
							: "did not complete within " + Duration.ofNanos(readTimeoutNanos)
									+ " (send-timeout, or connect-timeout when it is 0)")
					+ "; is the poller of queue '" + settings.sendQueue()
					+ "' running, and not blocked in this call? Its buffer is freed when the completion arrives");
		}
		if (peer.state() != ConnectionState.ESTABLISHED) {
			return peer.notEstablished();
		}
		return new RemoteAccessException(which + " failed: " + WcStatus.of(status));
	}

	/**
	 * The peer's region, once {@code length} bytes at {@code offset} are known to fit in
	 * it and the connection is established.
	 */
	RemoteRegion remoteFor(String operation, long offset, long length) {
		if (peer.state() != ConnectionState.ESTABLISHED) {
			throw peer.notEstablished();
		}
		RemoteRegion region = remoteRegion;
		if (region == null) {
			throw new IllegalStateException("RDMA " + operation + " on connection '" + settings.name()
					+ "': the peer exposes no region (its remote-access-size is 0, or it is not an rdma-spring-boot application)");
		}
		if (offset < 0 || length > region.length() - offset) {
			throw new IllegalArgumentException("RDMA " + operation + " of " + length + " bytes at offset " + offset
					+ " does not fit in the peer's region of " + region.length() + " bytes (connection '"
					+ settings.name() + "')");
		}
		return region;
	}

	/**
	 * Posts an RDMA WRITE of send buffer {@code index}; it is released on failure.
	 */
	void postWrite(int index, int length, RemoteRegion region, long offset) {
		try {
			sends.prepareOneSided(index, PeerConnection.SEND | PeerConnection.ONE_SIDED | index, length,
					QueuePair.SendOpcode.RDMA_WRITE, region.address() + offset, region.rkey());
			sends.postOneSided(index, groupNext, 1);
		}
		catch (RuntimeException ex) {
			sends.pool().release(index);
			if (peer.state() != ConnectionState.ESTABLISHED) {
				throw peer.notEstablished();
			}
			throw ex;
		}
	}

	/**
	 * An unsignaled operation that completed before a later one whose completion has
	 * {@code status}: written or read, or for a READ flushed when that completion is a
	 * flush (the operation that failed first had a completion of its own, which completed
	 * the READs before it as read). Poller thread.
	 */
	void completedUnsignaled(long wrId, int status) {
		boolean flushed = (wrId & PeerConnection.READ) != 0 && status == WcStatus.WR_FLUSH_ERR.code();
		completed(wrId, flushed ? status : 0);
	}

	/**
	 * The completion of an RDMA WRITE (frees its buffer) or READ (hands the status to its
	 * reader, or frees the buffer of an abandoned READ); on the send queue's poller.
	 */
	void completed(long wrId, int status) {
		int index = (int) (wrId & INDEX);
		boolean read = (wrId & PeerConnection.READ) != 0;
		if (status == 0) {
			(read ? counters.bytesRead : counters.bytesWritten).add(sends.length(index));
		}
		else {
			counters.sendErrors.increment();
			if (!peer.isClosing() && !peer.peerHasDisconnected() && status != WcStatus.WR_FLUSH_ERR.code()) {
				logger
					.warn("RDMA " + (read ? "READ" : "WRITE") + " of " + sends.length(index) + " bytes on connection '"
							+ settings.name() + "' (" + peer + ") failed: " + WcStatus.of(status));
			}
			peer.completionFailed(status);
		}
		if (!read) {
			sends.pool().release(index);
			return;
		}
		if (reads.complete(index, status)) {
			sends.pool().release(index); // its reader gave up
		}
	}

}
