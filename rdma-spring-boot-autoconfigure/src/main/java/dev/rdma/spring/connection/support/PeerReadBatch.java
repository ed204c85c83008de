package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.function.Supplier;

import dev.rdma.spring.connection.ReadBatch;

/**
 * A {@link ReadBatch}: the entries' remote offsets and targets, in arrays of
 * {@code send-depth} made once; {@link #read()} hands them to
 * {@link PeerOneSided#read(long[], MemorySegment[], int)} of the connection its
 * {@link dev.rdma.spring.connection.RdmaConnection} sends to at that moment.
 */
final class PeerReadBatch implements ReadBatch {

	private final Supplier<PeerConnection> target;

	private final String connection;

	private final int messageSize;

	private final long[] offsets;

	private final MemorySegment[] targets;

	private int count;

	PeerReadBatch(Supplier<PeerConnection> target, ConnectionSettings settings) {
		this.target = target;
		this.connection = settings.name();
		this.messageSize = settings.messageSize();
		this.offsets = new long[settings.sendDepth()];
		this.targets = new MemorySegment[settings.sendDepth()];
	}

	@Override
	public ReadBatch add(long remoteOffset, MemorySegment into) {
		checkTarget(into, messageSize, connection, "a batch");
		if (remoteOffset < 0) {
			throw new IllegalArgumentException("RDMA READ at offset " + remoteOffset + " (connection '" + connection
					+ "'): the offset in the peer's region must not be negative");
		}
		if (count == offsets.length) {
			throw new IllegalStateException("a batch holds at most send-depth (" + offsets.length
					+ ") READs of connection '" + connection + "': read() it first");
		}
		offsets[count] = remoteOffset;
		targets[count] = into;
		count++;
		return this;
	}

	/**
	 * Refuses a read-only target, or one longer than {@code message-size}, of a READ of
	 * connection {@code connection} in {@code where} (a batch or a stream).
	 */
	static void checkTarget(MemorySegment into, int messageSize, String connection, String where) {
		if (into.isReadOnly()) {
			throw new IllegalArgumentException("the target of an RDMA READ must be writable");
		}
		if (into.byteSize() > messageSize) {
			throw new IllegalArgumentException("an RDMA READ of " + into.byteSize() + " bytes in " + where
					+ " is larger than rdma.connections." + connection + ".message-size (" + messageSize
					+ "): read it with RdmaConnection.read, which reads in chunks");
		}
	}

	@Override
	public int size() {
		return count;
	}

	@Override
	public void read() {
		int n = count;
		if (n == 0) {
			return;
		}
		try {
			target.get().oneSided().read(offsets, targets, n);
		}
		finally {
			clear();
		}
	}

	@Override
	public void clear() {
		Arrays.fill(targets, 0, count, null);
		count = 0;
	}

	@Override
	public String toString() {
		return "ReadBatch[" + count + " READs]";
	}

}
