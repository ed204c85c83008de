package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The creation of a {@link QueuePair} ({@code ibv_create_qp}): the checks before the
 * call, the protection domain and both CQs held open for it, the
 * {@code struct ibv_qp_init_attr}, and a native QP that never outlives a refusal.
 * {@link ProtectionDomain#createQueuePair} is the public way in.
 */
final class QueuePairCreation {

	private QueuePairCreation() {
	}

	static QueuePair create(ProtectionDomain pd, QueuePair.Attributes attributes) {
		if (attributes.sendCq().context() != pd.context() || attributes.recvCq().context() != pd.context()) {
			throw new IllegalArgumentException("the CQs of a QP must belong to the PD's context");
		}
		SharedReceiveQueue srq = attributes.sharedReceiveQueue();
		if (srq != null && srq.protectionDomain() != pd) {
			throw new IllegalArgumentException(
					srq + " belongs to another protection domain than " + pd + " (ibv_create_qp, init_attr.srq)");
		}
		// each acquire paired with its own release: a closed CQ refused after the PD was
		// acquired must not leave the
		// PD held (its close would then wait for ever)
		pd.acquire();
		try {
			// read with the PD held: an open PD keeps its context (and the ibv_context
			// read here) from being freed by a close on another thread
			if (Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_SEND))
					|| Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_RECV))) {
				throw new VerbsException("ibv_create_qp", Errno.EOPNOTSUPP, "the provider has no post_send/post_recv");
			}
			attributes.sendCq().acquire();
			try {
				attributes.recvCq().acquire();
				try {
					if (srq == null) {
						return createAcquired(pd, attributes);
					}
					srq.acquire();
					try {
						return createAcquired(pd, attributes);
					}
					finally {
						srq.release();
					}
				}
				finally {
					attributes.recvCq().release();
				}
			}
			finally {
				attributes.sendCq().release();
			}
		}
		finally {
			pd.release();
		}
	}

	private static QueuePair createAcquired(ProtectionDomain pd, QueuePair.Attributes attributes) {
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_QP_INIT_ATTR;
			MemorySegment init = a.allocate(l);
			init.set(ADDRESS, Layouts.off(l, "send_cq"), attributes.sendCq().handle);
			init.set(ADDRESS, Layouts.off(l, "recv_cq"), attributes.recvCq().handle);
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_wr"), attributes.maxSendWr());
			SharedReceiveQueue srq = attributes.sharedReceiveQueue();
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_wr"), srq == null ? attributes.maxRecvWr() : 0);
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_inline_data"), attributes.maxInlineData());
			if (srq != null) {
				init.set(ADDRESS, Layouts.off(l, "srq"), srq.handle);
			}
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_sge"), 1);
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_sge"), 1);
			init.set(JAVA_INT, Layouts.off(l, "qp_type"), attributes.type().code);
			init.set(JAVA_INT, Layouts.off(l, "sq_sig_all"), attributes.signalAll() ? 1 : 0);
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment qp = (MemorySegment) Ibverbs.CREATE_QP.invokeExact(capture, pd.handle, init);
			if (Native.isNull(qp)) {
				int errno = Native.errno(capture);
				throw new VerbsException("ibv_create_qp", errno,
						LockedMemory.detail("ibv_create_qp", errno, attributes.toString()));
			}
			// ibv_create_qp writes the capabilities granted back into init_attr.cap
			QueuePair.Capabilities caps = new QueuePair.Capabilities(
					init.get(JAVA_INT, Layouts.off(l, "cap", "max_send_wr")),
					init.get(JAVA_INT, Layouts.off(l, "cap", "max_recv_wr")),
					init.get(JAVA_INT, Layouts.off(l, "cap", "max_send_sge")),
					init.get(JAVA_INT, Layouts.off(l, "cap", "max_recv_sge")),
					init.get(JAVA_INT, Layouts.off(l, "cap", "max_inline_data")));
			// the PD closed meanwhile (or the QP could not be built): the native QP must
			// not outlive the refusal
			return NativeObject.adopt(
					() -> new QueuePair(pd, qp.reinterpret(Layouts.IBV_QP.byteSize()), attributes, caps),
					() -> Native.callIntVerb(Ibverbs.DESTROY_QP, qp));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

}
