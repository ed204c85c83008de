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

	PeerOneSided(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters, PeerSends sends,
			List<CompletionRouter> routers, @Nullable MemoryRegion accessRegion) {
		super(peer, settings, counters);
		this.sends = sends;
		this.routers = routers;
		this.accessRegion = accessRegion;
		this.reads = new ReadCompletions(settings.sendDepth());
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
			post(index, n, QueuePair.SendOpcode.RDMA_WRITE, region, remoteOffset + done);
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
			post(index, n, QueuePair.SendOpcode.RDMA_WRITE, region, remoteOffset + done);
		}
	}

	void read(long remoteOffset, MemorySegment target) {
		if (target.isReadOnly()) {
			throw new IllegalArgumentException("the target of an RDMA READ must be writable");
		}
		long length = target.byteSize();
		RemoteRegion region = remoteFor("read", remoteOffset, length);
		Thread me = Thread.currentThread();
		for (int i = 0; i < routers.size(); i++) {
			CompletionRouter router = routers.get(i);
			if (router.queue().equals(settings.sendQueue()) && router.isPoller(me)) {
				throw new IllegalStateException("RDMA READ on connection '" + settings.name() + "' called on thread "
						+ me.getName() + ", the poller of its send queue '" + settings.sendQueue()
						+ "': it would wait for a completion only this thread delivers; read from another thread");
			}
		}
		int chunk = settings.messageSize();
		SendBufferPool pool = sends.pool();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = sends.take(n);
			reads.begin(index);
			post(index, n, QueuePair.SendOpcode.RDMA_READ, region, remoteOffset + done);
			int status = reads.await(index, readTimeoutNanos);
			if (status == ReadCompletions.ABANDONED) {
				// the buffer stays in flight: the READ's completion frees it
				boolean interrupted = me.isInterrupted();
				throw new RemoteAccessException("RDMA READ of " + n + " bytes on connection '" + settings.name() + "' "
						+ (interrupted ? "interrupted"
								: "did not complete within " + Duration.ofNanos(readTimeoutNanos)
										+ " (send-timeout, or connect-timeout when it is 0)")
						+ "; is the poller of queue '" + settings.sendQueue()
						+ "' running, and not blocked in this call? Its buffer is freed when the completion arrives");
			}
			if (status != 0) {
				pool.release(index);
				if (peer.state() != ConnectionState.ESTABLISHED) {
					throw peer.notEstablished();
				}
				throw new RemoteAccessException("RDMA READ of " + n + " bytes at offset " + (remoteOffset + done)
						+ " of the peer's region on connection '" + settings.name() + "' failed: "
						+ WcStatus.of(status));
			}
			MemorySegment.copy(sends.buffers(), (long) index * chunk, target, done, n);
			pool.release(index);
		}
	}

	/**
	 * The peer's region, once {@code length} bytes at {@code offset} are known to fit in
	 * it and the connection is established.
	 */
	private RemoteRegion remoteFor(String operation, long offset, long length) {
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
	 * Posts an RDMA WRITE or READ of send buffer {@code index}; it is released on
	 * failure.
	 */
	private void post(int index, int length, QueuePair.SendOpcode opcode, RemoteRegion region, long offset) {
		long kind = opcode == QueuePair.SendOpcode.RDMA_READ
				? PeerConnection.SEND | PeerConnection.ONE_SIDED | PeerConnection.READ
				: PeerConnection.SEND | PeerConnection.ONE_SIDED;
		try {
			sends.postOneSided(index, kind | index, length, opcode, region.address() + offset, region.rkey());
		}
		catch (RuntimeException ex) {
			if (opcode == QueuePair.SendOpcode.RDMA_READ) {
				reads.cancel(index);
			}
			sends.pool().release(index);
			if (peer.state() != ConnectionState.ESTABLISHED) {
				throw peer.notEstablished();
			}
			throw ex;
		}
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
