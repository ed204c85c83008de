package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A send work request for {@link QueuePair#postSend(SendWorkRequest)}
 * ({@code ibv_post_send}): a native {@code struct ibv_send_wr} with one
 * {@code struct ibv_sge}, filled once and posted as often as needed, like pyverbs'
 * {@code SendWR}. Posting allocates nothing; between posts change only what differs
 * (typically {@link #wrId(long)} and {@link #buffer(MemoryRegion, long, int)}). Every
 * setter checks its arguments and returns {@code this}.
 *
 * <p>
 * A new work request is a signaled {@link SendOpcode#SEND} (pyverbs' defaults) with
 * {@code wr_id} 0, no buffer, immediate data 0 and no remote address. Before a post it
 * needs a {@linkplain #buffer(MemoryRegion, long, int) buffer}; an RDMA operation needs
 * {@link #remote(long, int)}, a send on a UD QP
 * {@link #datagram(AddressHandle, int, int)}. The two share {@code ibv_send_wr.wr} (a
 * union in C): setting one clears the other. What depends on the QP (the opcode allowed,
 * whether an address handle is needed, its protection domain) is checked by the post,
 * which refuses, before anything is posted, a closed memory region or address handle and
 * a range outside the memory region.
 *
 * <p>
 * <b>Threads.</b> Not thread-safe: fill and post it on one thread at a time; handing it
 * to another thread needs a happens-before edge (a lock, a queue), as for any mutable
 * object. A post of a work request that another post is using is refused with
 * {@link IllegalStateException} (each post reads the fields once and checks them, so a
 * setter racing a post can make the post fail, never reach native code unchecked).
 * Different work requests may be posted to one QP from any number of threads.
 *
 * <p>
 * <b>Lifetime.</b> The native memory (about 150 bytes) belongs to the work request and is
 * returned once it is unreachable; {@link #close()} ends its use (a post afterwards is
 * refused with {@link IllegalStateException}). The provider copies the work request
 * during {@code ibv_post_send}, so it may be changed and posted again as soon as the post
 * returns, before its completion; the bytes of the buffer it named must stay unchanged
 * until that completion. Getters return what was set; {@link #memoryRegion()} and
 * {@link #addressHandle()} are null until set.
 */
public final class SendWorkRequest extends WorkRequest<SendWorkRequest> {

	/**
	 * {@code enum ibv_send_flags} this class supports.
	 */
	public enum Flag {

		/** {@code IBV_SEND_SIGNALED}: the send produces a completion. */
		SIGNALED(1 << 1),
		/**
		 * {@code IBV_SEND_SOLICITED}: the receiver's CQ event fires even when it was
		 * armed for solicited completions only.
		 */
		SOLICITED(1 << 2),
		/**
		 * {@code IBV_SEND_INLINE}: the provider copies the payload into the work queue
		 * during the post, so the buffer may be rewritten as soon as the post returns
		 * (and its lkey is not checked). At most {@link QueuePair#maxInlineData()} bytes;
		 * a longer inline send, or an inline RDMA_READ, is refused before the post with
		 * {@link IllegalArgumentException}.
		 */
		INLINE(1 << 3);

		final int bit;

		Flag(int bit) {
			this.bit = bit;
		}

	}

	private static final long OPCODE = Layouts.off(Layouts.IBV_SEND_WR, "opcode");

	private static final long SEND_FLAGS = Layouts.off(Layouts.IBV_SEND_WR, "send_flags");

	private static final long IMM = Layouts.off(Layouts.IBV_SEND_WR, "anon_imm", "imm_data");

	private static final long REMOTE_ADDR = Layouts.off(Layouts.IBV_SEND_WR, "wr", "rdma", "remote_addr");

	private static final long RKEY = Layouts.off(Layouts.IBV_SEND_WR, "wr", "rdma", "rkey");

	private static final long UD_AH = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "ah");

	private static final long UD_REMOTE_QPN = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "remote_qpn");

	private static final long UD_REMOTE_QKEY = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "remote_qkey");

	SendOpcode opcode = SendOpcode.SEND;

	int flags = Flag.SIGNALED.bit;

	int immData;

	long remoteAddress;

	int rkey;

	@Nullable AddressHandle ah;

	int remoteQpn;

	int remoteQkey;

	/** What a post holds open while it runs (set and cleared under the claim). */
	@Nullable MemoryRegion heldMr;

	@Nullable AddressHandle heldAh;

	/** A signaled SEND without a buffer (see the class comment). */
	public SendWorkRequest() {
		super(Layouts.IBV_SEND_WR);
	}

	/** {@code opcode}. */
	public SendWorkRequest opcode(SendOpcode opcode) {
		this.opcode = Objects.requireNonNull(opcode, "opcode");
		return this;
	}

	/**
	 * {@code send_flags}: exactly the given flags (none: an unsignaled send, which
	 * completes only when the QP was created with {@code signalAll}).
	 */
	public SendWorkRequest flags(Flag... flags) {
		int bits = 0;
		for (Flag f : flags) {
			bits |= Objects.requireNonNull(f, "flag").bit;
		}
		this.flags = bits;
		return this;
	}

	/**
	 * {@code imm_data} in host order (sent in network order), for
	 * {@link SendOpcode#SEND_WITH_IMM} and {@link SendOpcode#RDMA_WRITE_WITH_IMM}.
	 */
	public SendWorkRequest immediateData(int immData) {
		this.immData = immData;
		return this;
	}

	/**
	 * {@code wr.rdma}: the remote address and rkey of an RDMA WRITE or READ on an RC QP.
	 * Clears {@link #datagram(AddressHandle, int, int)}.
	 */
	public SendWorkRequest remote(long remoteAddress, int rkey) {
		this.remoteAddress = remoteAddress;
		this.rkey = rkey;
		this.ah = null;
		this.remoteQpn = 0;
		this.remoteQkey = 0;
		return this;
	}

	/**
	 * {@code wr.ud}: the destination of a datagram on a UD QP: QP {@code remoteQpn} at
	 * {@code ah}, which must belong to the QP's protection domain. Clears
	 * {@link #remote(long, int)}.
	 * @param remoteQkey the receiver's Q_Key; with the high bit set the QP's own Q_Key is
	 * sent instead
	 * @throws IllegalArgumentException when {@code remoteQpn} is outside
	 * 0..{@link QueuePair#MAX_QP_NUM}
	 */
	public SendWorkRequest datagram(AddressHandle ah, int remoteQpn, int remoteQkey) {
		Objects.requireNonNull(ah, "ah");
		Arguments.requireRange("remoteQpn (remote_qpn)", remoteQpn, 0, QueuePair.MAX_QP_NUM);
		this.ah = ah;
		this.remoteQpn = remoteQpn;
		this.remoteQkey = remoteQkey;
		this.remoteAddress = 0;
		this.rkey = 0;
		return this;
	}

	public SendOpcode opcode() {
		return opcode;
	}

	/** True when {@link #flags(Flag...)} set {@code flag}. */
	public boolean hasFlag(Flag flag) {
		return (flags & flag.bit) != 0;
	}

	public int immediateData() {
		return immData;
	}

	public long remoteAddress() {
		return remoteAddress;
	}

	public int rkey() {
		return rkey;
	}

	/** The address handle of a datagram, or null (see {@link #datagram}). */
	public @Nullable AddressHandle addressHandle() {
		return ah;
	}

	public int remoteQpn() {
		return remoteQpn;
	}

	public int remoteQkey() {
		return remoteQkey;
	}

	/**
	 * Writes the native struct from values the post read once and checked (the flags too:
	 * an INLINE send was checked against the QP's max_inline_data); with the work request
	 * claimed and the memory region (and address handle) held.
	 */
	void fill(long wrId, long address, int length, int lkey, SendOpcode opcode, int flags, int immData,
			@Nullable AddressHandle ah, long remoteAddress, int rkey, int remoteQpn, int remoteQkey) {
		fillBuffer(wrId, address, length, lkey);
		wr.set(JAVA_INT, OPCODE, opcode.code);
		wr.set(JAVA_INT, SEND_FLAGS, flags);
		wr.set(JAVA_INT, IMM, Integer.reverseBytes(immData));
		if (ah != null) {
			wr.set(JAVA_LONG, UD_AH, ah.handle.address());
			wr.set(JAVA_INT, UD_REMOTE_QPN, remoteQpn);
			wr.set(JAVA_INT, UD_REMOTE_QKEY, remoteQkey);
		}
		else {
			wr.set(JAVA_LONG, REMOTE_ADDR, remoteAddress);
			wr.set(JAVA_INT, RKEY, rkey);
		}
	}

	@Override
	String describe() {
		return ", " + opcode;
	}

}
