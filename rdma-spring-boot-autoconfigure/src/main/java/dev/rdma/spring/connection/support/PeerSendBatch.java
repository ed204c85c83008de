package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.SendBatch;
import dev.rdma.spring.connection.SendBuffer;
import dev.rdma.spring.connection.SendRefusedException;

/**
 * A {@link SendBatch}: the send buffers its messages were copied into (held by the
 * application, see {@link PeerSends#takeHeld}) and their lengths, in arrays of
 * {@code send-depth} made once; {@link #send()} posts them as consecutive places of the
 * send order ({@link PeerSends#postHeld}). The target is resolved at the first
 * {@code add} (a client bean's current connection, a server's one peer).
 */
final class PeerSendBatch implements SendBatch {

	private final Supplier<PeerConnection> target;

	private final int[] indexes;

	private final int[] lengths;

	private final boolean[] refused;

	private int count;

	private @Nullable PeerSends sends;

	PeerSendBatch(Supplier<PeerConnection> target, int sendDepth) {
		this.target = target;
		this.indexes = new int[sendDepth];
		this.lengths = new int[sendDepth];
		this.refused = new boolean[sendDepth];
	}

	@Override
	public SendBatch add(byte[] data, int offset, int length) {
		Objects.checkFromIndexSize(offset, length, data.length);
		PeerSends s = sends();
		int index = take(s, length);
		MemorySegment.copy(data, offset, s.buffers(), ValueLayout.JAVA_BYTE, (long) index * s.settings.messageSize(),
				length);
		return added(s, index, length);
	}

	@Override
	public SendBatch add(ByteBuffer data) {
		int length = data.remaining();
		PeerSends s = sends();
		int index = take(s, length);
		// an absolute bulk put: neither the shared view's position nor data's changes
		s.view().put(index * s.settings.messageSize(), data, data.position(), length);
		return added(s, index, length);
	}

	@Override
	public SendBatch add(MemorySegment data) {
		if (data.byteSize() > Integer.MAX_VALUE) {
			throw new IllegalArgumentException("a " + data.byteSize() + "-byte segment is larger than a message");
		}
		int length = (int) data.byteSize();
		PeerSends s = sends();
		int index = take(s, length);
		MemorySegment.copy(data, 0, s.buffers(), (long) index * s.settings.messageSize(), length);
		return added(s, index, length);
	}

	@Override
	public SendBatch add(SendBuffer buffer, int length) {
		if (!(buffer instanceof BorrowedSendBuffer lent)) {
			throw new IllegalArgumentException("not a buffer of RdmaConnection.borrowSendBuffer(): " + buffer);
		}
		PeerSends s = sends();
		lent.handOverTo(s, length);
		return added(s, lent.index(), length);
	}

	@Override
	public int size() {
		return count;
	}

	@Override
	public void send() {
		PeerSends s = sends;
		int n = count;
		count = 0;
		sends = null;
		if (s == null || n == 0) {
			return;
		}
		long first = s.postHeld(indexes, lengths, n);
		int notSent = 0;
		for (int i = 0; i < n; i++) {
			refused[i] = s.refused(indexes[i], first + i);
			notSent += refused[i] ? 1 : 0;
		}
		if (notSent > 0) {
			int[] positions = new int[notSent];
			for (int i = 0, j = 0; i < n; i++) {
				if (refused[i]) {
					positions[j++] = i;
				}
			}
			throw new SendRefusedException(notSent + " of the " + n + " messages of a batch on connection '"
					+ s.settings.name() + "' were refused by the provider and not sent", positions, n, s.lastRefusal());
		}
	}

	@Override
	public void clear() {
		PeerSends s = sends;
		int n = count;
		count = 0;
		sends = null;
		if (s != null) {
			for (int i = 0; i < n; i++) {
				s.giveBack(indexes[i]);
			}
		}
	}

	/**
	 * A buffer for the next message. When none is free and the batch holds messages, they
	 * are sent first (one post), then the add waits: with {@code signal-interval} above 1
	 * the sends posted while buffers were free are unsignaled up to the next signaled
	 * one, and their buffers come back only with a later signaled completion, which the
	 * batch's own post gives (it takes the last buffer: signaled unless a signaled one is
	 * already in flight). Waiting with them held, the add could wait for no completion at
	 * all, until {@code send-timeout}.
	 */
	private int take(PeerSends s, int length) {
		if (count > 0) {
			int index = s.tryTakeHeld(length);
			if (index >= 0) {
				return index;
			}
			send();
		}
		return s.takeHeld(length);
	}

	/** The send path the batch adds to: resolved at its first message. */
	private PeerSends sends() {
		PeerSends s = sends;
		if (s == null) {
			s = target.get().sends();
		}
		if (count == indexes.length) {
			throw new IllegalStateException("a batch holds at most send-depth (" + indexes.length
					+ ") messages of connection '" + s.settings.name() + "': send() it first");
		}
		return s;
	}

	private SendBatch added(PeerSends s, int index, int length) {
		sends = s;
		indexes[count] = index;
		lengths[count] = length;
		count++;
		return this;
	}

	@Override
	public String toString() {
		return "SendBatch[" + count + " messages]";
	}

}
