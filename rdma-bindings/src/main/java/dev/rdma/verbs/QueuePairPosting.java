package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The posting of one {@link QueuePair}: {@code ibv_post_send} and {@code ibv_post_recv},
 * the inline verbs of verbs.h, called through the provider's {@code post_send} /
 * {@code post_recv} of {@code qp->context->ops} (never as critical downcalls: a provider
 * may take its queue's lock). A post claims its work request (each of a chain), reads its
 * fields once, checks them against this QP, holds the QP, the memory region and the
 * address handle open, writes the work request's native struct and calls the provider.
 * Nothing is allocated. The public verbs and their documentation are {@link QueuePair}'s.
 */
final class QueuePairPosting {

	private final QueuePair qp;

	private final MemorySegment postSendFn;

	private final MemorySegment postRecvFn;

	/** This QP's send preparation: checked against the QP (type, PD, max_inline_data). */
	private final ChainPosting.Preparation<SendWorkRequest> sendPreparation = new ChainPosting.Preparation<>() {

		@Override
		public long nextOffset() {
			return ChainPosting.SEND_NEXT;
		}

		@Override
		public void prepare(SendWorkRequest wr, String verb, int index) {
			prepareSend(wr, index);
		}

		@Override
		public void release(SendWorkRequest wr) {
			releaseSend(wr);
		}

	};

	QueuePairPosting(QueuePair qp, MemorySegment context) {
		this.qp = qp;
		this.postSendFn = context.get(ADDRESS, Layouts.CONTEXT_POST_SEND);
		this.postRecvFn = context.get(ADDRESS, Layouts.CONTEXT_POST_RECV);
	}

	void postSend(SendWorkRequest wr) {
		ChainPosting.post(qp, postSendFn, "ibv_post_send", wr, sendPreparation);
	}

	void postSend(List<SendWorkRequest> wrs) {
		ChainPosting.postChain(qp, postSendFn, "ibv_post_send", wrs, sendPreparation);
	}

	/**
	 * Reads the work request's fields once (what is checked is what is posted), checks
	 * them against this QP, holds its memory region and address handle and writes its
	 * native struct ({@code next} NULL). On a throw nothing is held.
	 */
	private void prepareSend(SendWorkRequest wr, int index) {
		long wrId = wr.wrId;
		@Nullable MemoryRegion mr = wr.mr;
		long offset = wr.offset;
		int length = wr.length;
		SendOpcode opcode = wr.opcode;
		int flags = wr.flags;
		@Nullable AddressHandle ah = wr.ah;
		boolean ud = qp.type() == QueuePair.Type.UD;
		if (mr == null) {
			throw new IllegalStateException("ibv_post_send: " + wr
					+ " has no buffer (SendWorkRequest.buffer(mr, offset, length))" + ChainPosting.at(index));
		}
		if (ud && ah == null) {
			throw new IllegalStateException(qp.describe()
					+ " is a UD QP: each send needs an AddressHandle (ibv_post_send, SendWorkRequest.datagram)"
					+ ChainPosting.at(index));
		}
		if (!ud && ah != null) {
			throw new IllegalStateException(qp.describe()
					+ " is an RC QP: address handles are for UD sends (ibv_post_send, SendWorkRequest.datagram)"
					+ ChainPosting.at(index));
		}
		if (ud && opcode != SendOpcode.SEND && opcode != SendOpcode.SEND_WITH_IMM) {
			throw new IllegalArgumentException("a UD QP posts SEND or SEND_WITH_IMM only, not " + opcode
					+ " (ibv_post_send)" + ChainPosting.at(index));
		}
		if (ah != null && ah.protectionDomain() != qp.protectionDomain()) {
			throw new IllegalArgumentException(ah + " belongs to another protection domain than " + qp.describe()
					+ " (ibv_post_send)" + ChainPosting.at(index));
		}
		if ((flags & SendWorkRequest.Flag.INLINE.bit) != 0) {
			if (opcode == SendOpcode.RDMA_READ) {
				throw new IllegalArgumentException(
						"ibv_post_send: an RDMA_READ cannot be IBV_SEND_INLINE (" + wr + ")" + ChainPosting.at(index));
			}
			if (length > qp.maxInlineData()) {
				throw new IllegalArgumentException("ibv_post_send: an IBV_SEND_INLINE send of " + length
						+ " bytes exceeds max_inline_data " + qp.maxInlineData() + " of " + qp.describe() + " (" + wr
						+ "; ask for more with QueuePair.Attributes.withMaxInlineData)" + ChainPosting.at(index));
			}
		}
		mr.acquire();
		try {
			if (ah != null) {
				ah.acquire();
			}
			try {
				Arguments.requireWithin(mr.buffer().byteSize(), offset, length);
				wr.fill(wrId, mr.bufferAddress() + offset, length, mr.lkey(), opcode, flags, wr.immData, ah,
						wr.remoteAddress, wr.rkey, wr.remoteQpn, wr.remoteQkey);
				wr.wr.set(ADDRESS, ChainPosting.SEND_NEXT, MemorySegment.NULL);
				wr.heldMr = mr;
				wr.heldAh = ah;
			}
			catch (RuntimeException e) {
				if (ah != null) {
					ah.release();
				}
				throw e;
			}
		}
		catch (RuntimeException e) {
			mr.release();
			throw e;
		}
	}

	private static void releaseSend(SendWorkRequest wr) {
		AddressHandle ah = wr.heldAh;
		MemoryRegion mr = wr.heldMr;
		wr.heldAh = null;
		wr.heldMr = null;
		try {
			if (ah != null) {
				ah.release();
			}
		}
		finally {
			if (mr != null) {
				mr.release();
			}
		}
	}

	void postRecv(ReceiveWorkRequest wr) {
		requireOwnReceiveQueue();
		ChainPosting.post(qp, postRecvFn, "ibv_post_recv", wr, ChainPosting.RECEIVE);
	}

	void postRecv(List<ReceiveWorkRequest> wrs) {
		requireOwnReceiveQueue();
		ChainPosting.postChain(qp, postRecvFn, "ibv_post_recv", wrs, ChainPosting.RECEIVE);
	}

	private void requireOwnReceiveQueue() {
		SharedReceiveQueue srq = qp.sharedReceiveQueue();
		if (srq != null) {
			throw new IllegalStateException(qp.describe() + " receives from " + srq
					+ ": post its receives to the shared receive queue (ibv_post_srq_recv), not to the QP "
					+ "(ibv_post_recv)");
		}
	}

}
