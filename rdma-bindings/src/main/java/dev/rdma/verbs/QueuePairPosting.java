package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The posting of one {@link QueuePair}: {@code ibv_post_send} and {@code ibv_post_recv},
 * the inline verbs of verbs.h, called through the provider's {@code post_send} /
 * {@code post_recv} of {@code qp->context->ops} (never as critical downcalls: a provider
 * may take its queue's lock). A post claims its work request, reads its fields once,
 * checks them against this QP, holds the QP, the memory region and the address handle
 * open, writes the work request's native struct and calls the provider. Nothing is
 * allocated. The public verbs and their documentation are {@link QueuePair}'s.
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
		post(wr, "ibv_post_send", postSendFn);
	}

	void postRecv(ReceiveWorkRequest wr) {
		post(wr, "ibv_post_recv", postRecvFn);
	}

	private void post(WorkRequest<?> wr, String verb, MemorySegment postFn) {
		Objects.requireNonNull(wr, "wr");
		wr.claim.claim(verb, wr);
		try {
			// each field read once: what is checked is what is posted
			long wrId = wr.wrId;
			@Nullable MemoryRegion mr = wr.mr;
			long offset = wr.offset;
			int length = wr.length;
			@Nullable SendOpcode opcode = null;
			@Nullable AddressHandle ah = null;
			if (wr instanceof SendWorkRequest send) {
				opcode = send.opcode;
				ah = send.ah;
			}
			if (mr == null) {
				throw new IllegalStateException(verb + ": " + wr + " has no buffer (" + wr.getClass().getSimpleName()
						+ ".buffer(mr, offset, length))");
			}
			if (opcode != null) {
				checkSend(opcode, ah);
			}
			qp.acquire();
			try {
				mr.acquire();
				try {
					if (ah != null) {
						ah.acquire();
					}
					try {
						Arguments.requireWithin(mr.buffer().byteSize(), offset, length);
						wr.fill(wrId, mr.bufferAddress() + offset, length, mr.lkey(), opcode, ah);
						int rc = (int) Ibverbs.FP_POST.invokeExact(postFn, qp.handle, wr.wr, wr.badWr);
						if (rc != 0) {
							throw new VerbsException(verb, rc, qp.describe() + " wr_id " + wrId);
						}
					}
					finally {
						if (ah != null) {
							ah.release();
						}
					}
				}
				finally {
					mr.release();
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

	/**
	 * What a send needs of this QP: an address handle on UD only, its opcodes, its PD.
	 */
	private void checkSend(SendOpcode opcode, @Nullable AddressHandle ah) {
		boolean ud = qp.type() == QueuePair.Type.UD;
		if (ud && ah == null) {
			throw new IllegalStateException(qp.describe()
					+ " is a UD QP: each send needs an AddressHandle (ibv_post_send, SendWorkRequest.datagram)");
		}
		if (!ud && ah != null) {
			throw new IllegalStateException(qp.describe()
					+ " is an RC QP: address handles are for UD sends (ibv_post_send, SendWorkRequest.datagram)");
		}
		if (ud && opcode != SendOpcode.SEND && opcode != SendOpcode.SEND_WITH_IMM) {
			throw new IllegalArgumentException(
					"a UD QP posts SEND or SEND_WITH_IMM only, not " + opcode + " (ibv_post_send)");
		}
		if (ah != null && ah.protectionDomain() != qp.protectionDomain()) {
			throw new IllegalArgumentException(
					ah + " belongs to another protection domain than " + qp.describe() + " (ibv_post_send)");
		}
	}

}
