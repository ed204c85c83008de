package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A shared receive queue ({@code struct ibv_srq *}, {@code ibv_create_srq} /
 * {@code ibv_modify_srq} / {@code ibv_query_srq} / {@code ibv_destroy_srq}): one pool of
 * receive buffers for any number of queue pairs of its protection domain, each created
 * with {@link QueuePair.Attributes#withSharedReceiveQueue(SharedReceiveQueue)}. A receive
 * completion names the QP that took the buffer in its {@code qp_num}.
 *
 * <p>
 * {@link #postRecv(ReceiveWorkRequest)} and {@link #postRecv(List)} are
 * {@code ibv_post_srq_recv}, the inline verb of verbs.h, called through
 * {@code srq->context->ops.post_srq_recv} (checked for NULL at creation: a provider
 * without it is refused with EOPNOTSUPP before the SRQ is created); they allocate
 * nothing. {@link #armLimit(int)} ({@code ibv_modify_srq} with {@code IBV_SRQ_LIMIT})
 * asks for one {@link AsyncEventType#SRQ_LIMIT_REACHED} event when fewer than
 * {@code limit} receives remain; the device then disarms the limit, and the event arrives
 * through {@link Context#getAsyncEvent(java.time.Duration)} with
 * {@link AsyncEvent#sharedReceiveQueue()} set to this object (counted by
 * {@link #limitEvents()}). {@link AsyncEventType#SRQ_ERR} is reported the same way.
 * {@code ibv_create_srq_ex} is not offered: it adds XRC and tag matching, which rxe
 * lacks, and nothing the plain verb does not give.
 *
 * <p>
 * <b>Threads and lifetime.</b> Thread-safe; any number of threads may post, each with its
 * own work requests (the provider serialises the posts). {@link #close()} is idempotent;
 * it is refused with {@link VerbsException} (EBUSY, before any native call) while a QP of
 * this binding still receives from the SRQ. Its protection domain closes its QPs first,
 * then its SRQs, so closing the PD (or the context) closes it in the right order.
 */
public final class SharedReceiveQueue extends NativeObject {

	/** {@code IBV_SRQ_MAX_WR}. */
	static final int IBV_SRQ_MAX_WR = 1;

	/** {@code IBV_SRQ_LIMIT}. */
	static final int IBV_SRQ_LIMIT = 1 << 1;

	/**
	 * {@code struct ibv_srq_attr}.
	 *
	 * @param maxWr {@code max_wr}: receives the SRQ holds
	 * @param maxSge {@code max_sge}: scatter entries per receive
	 * @param limit {@code srq_limit}: the armed limit, 0 when none is armed
	 */
	public record Attributes(int maxWr, int maxSge, int limit) {
	}

	private final ProtectionDomain pd;

	private final MemorySegment postSrqRecvFn;

	private final Attributes created;

	private final AtomicLong limitEvents = new AtomicLong();

	private final AtomicLong errorEvents = new AtomicLong();

	/** The QPs receiving from this SRQ; guarded by itself. */
	private final List<QueuePair> users = new ArrayList<>();

	private SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, MemorySegment postSrqRecvFn,
			Attributes created) {
		super(srq, pd);
		this.pd = pd;
		this.postSrqRecvFn = postSrqRecvFn;
		this.created = created;
	}

	/**
	 * {@code ibv_create_srq} with {@code max_wr}, one scatter entry per receive and no
	 * limit armed.
	 */
	static SharedReceiveQueue create(ProtectionDomain pd, int maxWr) {
		Arguments.requireRange("maxWr (max_wr)", maxWr, 1, Integer.MAX_VALUE);
		pd.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment fn = pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_SRQ_RECV);
			if (Native.isNull(fn)) {
				throw new VerbsException("ibv_create_srq", Errno.EOPNOTSUPP,
						"the provider of " + pd.context().deviceName() + " has no post_srq_recv");
			}
			var l = Layouts.IBV_SRQ_INIT_ATTR;
			MemorySegment init = a.allocate(l);
			init.set(JAVA_INT, Layouts.off(l, "attr", "max_wr"), maxWr);
			init.set(JAVA_INT, Layouts.off(l, "attr", "max_sge"), 1);
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment srq = (MemorySegment) Ibverbs.CREATE_SRQ.invokeExact(capture, pd.handle, init);
			if (Native.isNull(srq)) {
				throw new VerbsException("ibv_create_srq", Native.errno(capture),
						"max_wr " + maxWr + ", " + pd.context().deviceName());
			}
			// ibv_create_srq writes what the provider granted back into the attributes
			Attributes granted = new Attributes(init.get(JAVA_INT, Layouts.off(l, "attr", "max_wr")),
					init.get(JAVA_INT, Layouts.off(l, "attr", "max_sge")), 0);
			MemorySegment handle = srq.reinterpret(Layouts.IBV_SRQ.byteSize());
			return adopt(() -> new SharedReceiveQueue(pd, handle, fn, granted),
					() -> Native.callIntVerb(Ibverbs.DESTROY_SRQ, srq));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			pd.release();
		}
	}

	public ProtectionDomain protectionDomain() {
		return pd;
	}

	/**
	 * The attributes the provider granted at creation (its {@code max_wr} may exceed the
	 * one asked for).
	 */
	public Attributes createdAttributes() {
		return created;
	}

	/**
	 * {@code ibv_post_srq_recv} of one work request, filled beforehand and reusable (see
	 * {@link ReceiveWorkRequest}). Allocates nothing.
	 * @throws IllegalStateException when this SRQ or the memory region is closed, or
	 * {@code wr} is closed, has no buffer, or another post is using it (nothing is
	 * posted)
	 * @throws VerbsException when the provider refuses it (ENOMEM: the SRQ is full)
	 */
	public void postRecv(ReceiveWorkRequest wr) {
		ChainPosting.post(this, postSrqRecvFn, "ibv_post_srq_recv", wr, ChainPosting.RECEIVE);
	}

	/**
	 * {@code ibv_post_srq_recv} of a chain: the work requests of {@code wrs}, linked in
	 * list order through their {@code next} pointers, in one call. Allocates nothing
	 * (iterate an {@link java.util.ArrayList} or an array-backed list). Every element is
	 * checked before the call; a refused element throws before anything is posted.
	 * @throws ChainPostException when the provider refuses an element: the ones before it
	 * were posted, it and the ones after it were not
	 * @throws IllegalArgumentException when {@code wrs} is empty
	 * @throws IllegalStateException as {@link #postRecv(ReceiveWorkRequest)}, and when
	 * one work request appears twice (nothing is posted)
	 */
	public void postRecv(List<ReceiveWorkRequest> wrs) {
		ChainPosting.postChain(this, postSrqRecvFn, "ibv_post_srq_recv", wrs, ChainPosting.RECEIVE);
	}

	/**
	 * {@code ibv_modify_srq} with {@code IBV_SRQ_LIMIT}: arms the limit, so that one
	 * {@link AsyncEventType#SRQ_LIMIT_REACHED} event arrives once fewer than
	 * {@code limit} receives remain in the SRQ; the device disarms it then (arm it again
	 * after refilling). 0 disarms.
	 * @throws VerbsException when the provider refuses (rxe: EINVAL for a limit above the
	 * receives now posted, or above {@code max_wr})
	 */
	public void armLimit(int limit) {
		Arguments.requireRange("limit (srq_limit)", limit, 0, Integer.MAX_VALUE);
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_SRQ_ATTR);
			attr.set(JAVA_INT, Layouts.off(Layouts.IBV_SRQ_ATTR, "srq_limit"), limit);
			int rc = (int) Ibverbs.MODIFY_SRQ.invokeExact(handle, attr, IBV_SRQ_LIMIT);
			if (rc != 0) {
				throw new VerbsException("ibv_modify_srq", rc, describe() + " srq_limit " + limit);
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/** {@code ibv_query_srq}: the SRQ's current attributes, the limit armed included. */
	public Attributes query() {
		acquire();
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_SRQ_ATTR;
			MemorySegment attr = a.allocate(l);
			int rc = (int) Ibverbs.QUERY_SRQ.invokeExact(handle, attr);
			if (rc != 0) {
				throw new VerbsException("ibv_query_srq", rc, describe());
			}
			return new Attributes(attr.get(JAVA_INT, Layouts.off(l, "max_wr")),
					attr.get(JAVA_INT, Layouts.off(l, "max_sge")), attr.get(JAVA_INT, Layouts.off(l, "srq_limit")));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/** The {@link AsyncEventType#SRQ_LIMIT_REACHED} events read for this SRQ so far. */
	public long limitEvents() {
		return limitEvents.get();
	}

	/** The {@link AsyncEventType#SRQ_ERR} events read for this SRQ so far. */
	public long errorEvents() {
		return errorEvents.get();
	}

	void recordEvent(AsyncEventType type) {
		(type == AsyncEventType.SRQ_LIMIT_REACHED ? limitEvents : errorEvents).incrementAndGet();
	}

	/** The open QPs receiving from this SRQ, oldest first. */
	public List<QueuePair> queuePairs() {
		synchronized (users) {
			return List.copyOf(users);
		}
	}

	void addUser(QueuePair qp) {
		synchronized (users) {
			users.add(qp);
		}
	}

	void removeUser(QueuePair qp) {
		synchronized (users) {
			users.remove(qp);
		}
	}

	@Override
	void checkCloseAllowed() {
		List<QueuePair> current = queuePairs();
		if (!current.isEmpty()) {
			throw new VerbsException("ibv_destroy_srq", Errno.EBUSY,
					describe() + " is still used by " + current + ": close the QP(s) first");
		}
	}

	@Override
	String describe() {
		return "SharedReceiveQueue[" + pd.context().deviceName() + " max_wr " + created.maxWr() + "]";
	}

	@Override
	void destroy() {
		destroyVerb(Ibverbs.DESTROY_SRQ, handle, "ibv_destroy_srq", describe());
	}

}
