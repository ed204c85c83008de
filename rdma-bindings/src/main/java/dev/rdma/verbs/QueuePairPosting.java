package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

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

	QueuePairPosting(QueuePair qp, MemorySegment context) {
		this.qp = qp;
		this.postSendFn = context.get(ADDRESS, Layouts.CONTEXT_POST_SEND);
		this.postRecvFn = context.get(ADDRESS, Layouts.CONTEXT_POST_RECV);
	}

	void postSend(SendWorkRequest wr) {
		Objects.requireNonNull(wr, "wr");
		wr.claim.claim("ibv_post_send", wr);
		try {
			qp.acquire();
			try {
				prepareSend(wr, -1);
				try {
					int rc = (int) Ibverbs.FP_POST.invokeExact(postSendFn, qp.handle, wr.wr, wr.badWr);
					if (rc != 0) {
						throw new VerbsException("ibv_post_send", rc, qp.describe() + " wr_id " + wr.wrId);
					}
				}
				finally {
					releaseSend(wr);
				}
			}
			finally {
				qp.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			wr.claim.unclaim();
		}
	}

	void postSend(List<SendWorkRequest> wrs) {
		int n = wrs.size();
		if (n == 0) {
			throw new IllegalArgumentException("ibv_post_send: the chain of work requests is empty");
		}
		int claimed = 0;
		int prepared = 0;
		try {
			for (; claimed < n; claimed++) {
				SendWorkRequest wr = Objects.requireNonNull(wrs.get(claimed), "wrs element");
				wr.claim.claim("ibv_post_send", wr);
			}
			qp.acquire();
			try {
				for (; prepared < n; prepared++) {
					SendWorkRequest wr = wrs.get(prepared);
					prepareSend(wr, prepared);
					if (prepared > 0) {
						wrs.get(prepared - 1).wr.set(ADDRESS, ChainPosting.SEND_NEXT, wr.wr);
					}
				}
				SendWorkRequest first = wrs.get(0);
				int rc = (int) Ibverbs.FP_POST.invokeExact(postSendFn, qp.handle, first.wr, first.badWr);
				if (rc != 0) {
					long bad = first.badWr.get(ADDRESS, 0).address();
					int index = -1;
					for (int i = 0; i < n && index < 0; i++) {
						if (wrs.get(i).wr.address() == bad) {
							index = i;
						}
					}
					throw new ChainPostException("ibv_post_send", rc, index, n, index < 0 ? 0 : wrs.get(index).wrId,
							qp.describe());
				}
			}
			finally {
				for (int i = 0; i < prepared; i++) {
					SendWorkRequest wr = wrs.get(i);
					wr.wr.set(ADDRESS, ChainPosting.SEND_NEXT, MemorySegment.NULL);
					releaseSend(wr);
				}
				qp.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			for (int i = 0; i < claimed; i++) {
				wrs.get(i).claim.unclaim();
			}
		}
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
		ChainPosting.postRecv(qp, postRecvFn, "ibv_post_recv", wr);
	}

	void postRecv(List<ReceiveWorkRequest> wrs) {
		requireOwnReceiveQueue();
		ChainPosting.postRecvChain(qp, postRecvFn, "ibv_post_recv", wrs);
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
