package dev.rdma.verbs.efa;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.BitFlag;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.RdmaUnavailableException;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.CqProviderCalls;
import dev.rdma.verbs.ffm.Efa;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.MemorySegment;
import java.util.Set;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An EFA completion queue: an {@link ExtendedCompletionQueue} created by
 * {@code efadv_create_cq} (libefa), with the EFA readers of {@code struct efadv_cq}
 * ({@code efadv_cq_from_ibv_cq_ex}): {@code efadv_wc_read_sgid} ({@link #readSgid()}) and
 * {@code efadv_wc_is_unsolicited} ({@link #isUnsolicited()}).
 *
 * <p>
 * <b>Reading the EFA fields</b> works like pyverbs' {@code EfaCQ}: they are fields of the
 * completion the CQ's iterator stands on, read through this CQ, not through the generic
 * {@link dev.rdma.verbs.WorkCompletion}. Valid only while that completion is current, on
 * the polling thread: inside the handler of
 * {@link #poll(dev.rdma.verbs.WorkCompletionBuffer, dev.rdma.verbs.CompletionHandler)},
 * or after a {@link #startPoll()} or {@link #nextPoll()} that returned true, until the
 * next {@link #nextPoll()} or {@link #endPoll()}; elsewhere (also after a
 * {@link #nextPoll()} that returned false or threw) they throw
 * {@link IllegalStateException} without calling the provider.
 * {@link #poll(dev.rdma.verbs.WorkCompletionBuffer)} (the batch copy) does not copy them.
 *
 * <p>
 * {@code efadv_cq_init_attr} is passed in its rdma-core 44 layout (16 bytes,
 * {@code inlen} = 16), which every libefa version accepts.
 * {@link EfaWcFlag#IS_UNSOLICITED} needs rdma-core 52+ (older libefa refuses it with
 * EOPNOTSUPP); its reader is read from {@code efadv_cq} only when the CQ was created with
 * it. On a device that is not EFA, the provider refuses every request with EOPNOTSUPP.
 *
 * <p>
 * EFA CQs take no reference on their completion channel in libibverbs; this binding keeps
 * the channel from being destroyed while the CQ exists.
 */
public final class EfaCompletionQueue extends ExtendedCompletionQueue {

	private final EfaReaders efa;

	/**
	 * @param context the owner; null for a CQ over memory that is not a device's (the
	 * tests')
	 */
	EfaCompletionQueue(@Nullable Context context, MemorySegment cq, CqInitAttributes attributes, EfaReaders efa,
			CqProviderCalls calls) {
		super(context, cq, attributes, true, calls);
		this.efa = efa;
	}

	/**
	 * {@code efadv_create_cq}: an EFA CQ of {@code context}, with the EFA fields of
	 * {@code efaWcFlags}. Closed by its context when not closed before.
	 * @throws RdmaUnavailableException when libefa cannot be loaded
	 * @throws VerbsException with the errno when the provider refuses (EOPNOTSUPP on a
	 * device that is not EFA)
	 */
	public static EfaCompletionQueue create(Context context, CqInitAttributes attributes, Set<EfaWcFlag> efaWcFlags) {
		Rdma.requireLibrary();
		if (!Efa.available()) {
			throw new RdmaUnavailableException("cannot load " + Efa.SONAME + " (package ibverbs-providers): "
					+ "EFA completion queues are unavailable", Efa.LOAD_FAILURE);
		}
		long efaMask = BitFlag.mask(efaWcFlags);
		return createHolding(context, attributes, () -> createHeld(context, attributes, efaWcFlags, efaMask));
	}

	/** {@link #create} inside {@code createHolding}. */
	private static EfaCompletionQueue createHeld(Context context, CqInitAttributes attributes,
			Set<EfaWcFlag> efaWcFlags, long efaMask) {
		MemorySegment cq = createNative(context, attributes, "efadv_create_cq", ", efa wc_flags=" + efaWcFlags,
				(arena, capture, ctx, attr) -> {
					MemorySegment efaAttr = arena.allocate(Layouts.EFADV_CQ_INIT_ATTR);
					efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "comp_mask"), 0L);
					efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "wc_flags"), efaMask);
					return (MemorySegment) Efa.CREATE_CQ.invokeExact(capture, ctx, attr, efaAttr,
							(int) Layouts.EFADV_CQ_INIT_ATTR.byteSize());
				});
		return adoptCreated(cq, () -> {
			MemorySegment dv;
			try {
				dv = (MemorySegment) Efa.CQ_FROM_IBV_CQ_EX.invokeExact(cq);
			}
			catch (Throwable t) {
				throw Native.unchecked(t);
			}
			if (Native.isNull(dv)) {
				throw new VerbsException("efadv_cq_from_ibv_cq_ex", 0, "returned NULL");
			}
			// EFA CQs do not store cq_context/channel in libibverbs' ibv_cq: the binding
			// keeps them itself.
			EfaReaders efa = new EfaReaders(dv.reinterpret(Layouts.EFADV_CQ.byteSize() + 8), efaMask);
			return new EfaCompletionQueue(context, cq, attributes, efa, providerCalls(context));
		});
	}

	/** The {@link EfaWcFlag} bits this CQ was created with. */
	public long efaWcFlags() {
		return efa.flags();
	}

	/** True when field {@code flag} was requested at creation and can be read. */
	public boolean provides(EfaWcFlag flag) {
		return (efa.flags() & flag.bit()) != 0;
	}

	/**
	 * The {@code struct efadv_cq *} of this CQ, as {@code efadv_cq_from_ibv_cq_ex}
	 * returned it at creation (never 0: creation fails on NULL). Valid until
	 * {@link #close()}; for diagnostics, the binding reads the EFA fields itself
	 * ({@link #readSgid()}, {@link #isUnsolicited()}).
	 */
	public long efadvCqAddress() {
		return efa.efadvCqAddress();
	}

	/**
	 * {@code efadv_wc_read_sgid} of the current completion: its source GID when the
	 * source AH is unknown, null when the provider reports it known (negative return).
	 * Needs {@link EfaWcFlag#SGID}. Allocates the result. See the class comment for when
	 * it may be called.
	 * @throws IllegalStateException without a current completion on this thread (see the
	 * class comment), or when the CQ was created without {@link EfaWcFlag#SGID}
	 */
	public @Nullable Gid readSgid() {
		requireCurrent();
		return efa.readSgid() ? new Gid(efa.gid().toArray(JAVA_BYTE)) : null;
	}

	/**
	 * {@code efadv_wc_is_unsolicited} of the current completion: whether a receive
	 * completion is unsolicited. Needs {@link EfaWcFlag#IS_UNSOLICITED}. See the class
	 * comment for when it may be called.
	 * @throws IllegalStateException without a current completion on this thread (see the
	 * class comment), or when the CQ was created without {@link EfaWcFlag#IS_UNSOLICITED}
	 */
	public boolean isUnsolicited() {
		requireCurrent();
		return efa.isUnsolicited();
	}

	private void requireCurrent() {
		if (!hasCurrentCompletion()) {
			throw noCurrentCompletion("an EFA completion field was read");
		}
	}

}
