package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;

/**
 * A protection domain ({@code struct ibv_pd *}, {@code ibv_alloc_pd} /
 * {@code ibv_dealloc_pd}). Registers memory, creates queue pairs, shared receive queues
 * and address handles; {@link #close()} closes its QPs, then its shared receive queues,
 * then its address handles, then its MRs. Thread-safe.
 */
public final class ProtectionDomain extends NativeObject {

	private final Context context;

	private final ProtectionDomain parent;

	private ProtectionDomain(Context context, MemorySegment pd, ProtectionDomain parent) {
		super(pd, parent == null ? context : parent);
		this.context = context;
		this.parent = parent;
	}

	static ProtectionDomain allocate(Context context) {
		context.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment pd = (MemorySegment) Ibverbs.ALLOC_PD.invokeExact(capture, context.handle);
			if (Native.isNull(pd)) {
				throw new VerbsException("ibv_alloc_pd", Native.errno(capture), context.deviceName());
			}
			return adopt(() -> new ProtectionDomain(context, pd, null),
					() -> Native.callIntVerb(Ibverbs.DEALLOC_PD, pd));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			context.release();
		}
	}

	public Context context() {
		return context;
	}

	/**
	 * True for a parent domain ({@link #allocateParentDomain()}), which a CQ can take as
	 * {@code parent_domain}.
	 */
	public boolean isParentDomain() {
		return parent != null;
	}

	/**
	 * {@code ibv_alloc_parent_domain} over this PD (no thread domain, no custom
	 * allocators): the inline verb of verbs.h, through
	 * {@code verbs_context.alloc_parent_domain}. Providers without parent domains (rxe)
	 * refuse with EOPNOTSUPP. The parent domain is closed before this PD.
	 */
	public ProtectionDomain allocateParentDomain() {
		if (parent != null) {
			throw new IllegalStateException("a parent domain is allocated over a plain PD, not over " + this);
		}
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment fn = context.verbsOp(Layouts.VCTX_ALLOC_PARENT_DOMAIN);
			if (Native.isNull(fn)) {
				throw new VerbsException("ibv_alloc_parent_domain", Errno.EOPNOTSUPP,
						"the provider of " + context.deviceName() + " has no parent domains");
			}
			var l = Layouts.IBV_PARENT_DOMAIN_INIT_ATTR;
			MemorySegment attr = a.allocate(l);
			attr.set(java.lang.foreign.ValueLayout.ADDRESS, Layouts.off(l, "pd"), handle);
			MemorySegment capture = Native.allocateCapture(a);
			Libc.clearErrno();
			MemorySegment pd = (MemorySegment) Ibverbs.FP_ALLOC_PARENT_DOMAIN.invokeExact(fn, capture, context.handle,
					attr);
			if (Native.isNull(pd)) {
				throw new VerbsException("ibv_alloc_parent_domain", Native.errno(capture), describe());
			}
			return adopt(() -> new ProtectionDomain(context, pd, this),
					() -> Native.callIntVerb(Ibverbs.DEALLOC_PD, pd));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_reg_mr} over {@code size} bytes of fresh native memory (page-aligned,
	 * zeroed), freed when the MR is closed.
	 */
	public MemoryRegion registerMemory(long size, Set<MemoryRegion.Access> access) {
		return MemoryRegion.register(this, size, access);
	}

	/** {@code ibv_create_qp} of an RC or UD QP ({@link QueuePair.Attributes#type()}). */
	public QueuePair createQueuePair(QueuePair.Attributes attributes) {
		return QueuePairCreation.create(this, attributes);
	}

	/**
	 * {@code ibv_create_srq}: a shared receive queue of {@code maxWr} receives (one
	 * scatter entry each) for QPs of this PD created with
	 * {@link QueuePair.Attributes#withSharedReceiveQueue(SharedReceiveQueue)}. Closed
	 * after those QPs and before this PD.
	 * @throws IllegalArgumentException when {@code maxWr} is below 1
	 * @throws VerbsException when the provider refuses (EOPNOTSUPP without
	 * {@code post_srq_recv}; EINVAL above the device's {@code max_srq_wr})
	 */
	public SharedReceiveQueue createSharedReceiveQueue(int maxWr) {
		return SharedReceiveQueue.create(this, maxWr);
	}

	/** The open shared receive queues of this PD, oldest first. */
	public List<SharedReceiveQueue> sharedReceiveQueues() {
		return dependants(SharedReceiveQueue.class);
	}

	/** {@code ibv_create_ah}: an address handle for the UD sends of this PD's QPs. */
	public AddressHandle createAddressHandle(AddressHandle.Attributes attributes) {
		return AddressHandle.create(this, attributes);
	}

	/** The open QPs of this PD, oldest first. */
	public List<QueuePair> queuePairs() {
		return dependants(QueuePair.class);
	}

	/** The open address handles of this PD, oldest first. */
	public List<AddressHandle> addressHandles() {
		return dependants(AddressHandle.class);
	}

	@Override
	void closeDependants() {
		for (QueuePair qp : queuePairs().reversed()) {
			qp.close();
		}
		for (SharedReceiveQueue srq : sharedReceiveQueues().reversed()) {
			srq.close();
		}
		for (AddressHandle ah : addressHandles().reversed()) {
			ah.close();
		}
		super.closeDependants();
	}

	@Override
	String describe() {
		return (parent == null ? "ProtectionDomain[" : "ParentDomain[") + context.deviceName() + "]";
	}

	@Override
	void destroy() {
		destroyVerb(Ibverbs.DEALLOC_PD, handle, "ibv_dealloc_pd", describe());
	}

}
