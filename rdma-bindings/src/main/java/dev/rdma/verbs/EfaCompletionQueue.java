package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Efa;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An EFA completion queue: an {@link ExtendedCompletionQueue} created by
 * {@code efadv_create_cq} (libefa), with the EFA readers of {@code struct efadv_cq}
 * ({@code efadv_cq_from_ibv_cq_ex}): {@code efadv_wc_read_sgid} and
 * {@code efadv_wc_is_unsolicited}.
 *
 * <p>
 * {@code efadv_cq_init_attr} is passed in its rdma-core 44 layout (16 bytes,
 * {@code inlen} = 16), which every libefa version accepts.
 * {@link EfaWcFlag#IS_UNSOLICITED} needs rdma-core 52+ (older libefa refuses it with
 * EOPNOTSUPP); its reader is read from {@code efadv_cq} only when the CQ was created with
 * it. On a device that is not EFA, the provider refuses every request with EOPNOTSUPP.
 *
 * <p>
 * The EFA fields are read through {@link WorkCompletion#sgid()} and
 * {@link WorkCompletion#isUnsolicited()} of the completions this CQ delivers (their
 * readers are part of the CQ's readers: this class adds creation only).
 *
 * <p>
 * EFA CQs take no reference on their completion channel in libibverbs; this binding keeps
 * the channel from being destroyed while the CQ exists.
 */
public final class EfaCompletionQueue extends ExtendedCompletionQueue {

	private final EfaReaders efa;

	private EfaCompletionQueue(@Nullable Context context, MemorySegment cq, CqInitAttributes attributes, EfaReaders efa,
			ProviderCalls calls) {
		super(context, cq, attributes, true, calls, efa);
		this.efa = efa;
	}

	/**
	 * A stand-in of the tests: memory laid out as {@code ibv_cq_ex} and {@code efadv_cq}
	 * (24 bytes) whose functions are native functions of theirs, {@code destroyFn} one
	 * with ibv_destroy_cq's signature.
	 */
	static EfaCompletionQueue standIn(MemorySegment fakeCq, MemorySegment fakeEfadvCq, CqInitAttributes attributes,
			Set<EfaWcFlag> efaWcFlags, MemorySegment destroyFn) {
		return new EfaCompletionQueue(null, fakeCq, attributes,
				new EfaReaders(fakeEfadvCq.reinterpret(24), EfaWcFlag.mask(efaWcFlags)),
				new ProviderCalls(MemorySegment.NULL, MemorySegment.NULL, destroyFn));
	}

	static EfaCompletionQueue create(Context context, CqInitAttributes attributes, Set<EfaWcFlag> efaWcFlags) {
		Rdma.requireEfa();
		checkChannel(context, attributes.channel());
		long efaMask = EfaWcFlag.mask(efaWcFlags == null ? Set.of() : efaWcFlags);
		MemorySegment cq;
		MemorySegment dv;
		context.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = fill(a, attributes);
			MemorySegment efaAttr = a.allocate(Layouts.EFADV_CQ_INIT_ATTR);
			efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "comp_mask"), 0L);
			efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "wc_flags"), efaMask);
			MemorySegment capture = Native.allocateCapture(a);
			Libc.clearErrno();
			cq = (MemorySegment) Efa.CREATE_CQ.invokeExact(capture, context.handle, attr, efaAttr,
					(int) Layouts.EFADV_CQ_INIT_ATTR.byteSize());
			if (Native.isNull(cq)) {
				throw new VerbsException("efadv_create_cq", Native.errno(capture),
						describe(context, attributes) + ", efa wc_flags=" + efaWcFlags);
			}
			cq = checkIterator(cq.reinterpret(Layouts.IBV_CQ_EX.byteSize()), "efadv_create_cq");
			dv = (MemorySegment) Efa.CQ_FROM_IBV_CQ_EX.invokeExact(cq);
			if (Native.isNull(dv)) {
				int ignored = (int) Ibverbs.DESTROY_CQ.invokeExact(cq);
				throw new VerbsException("efadv_cq_from_ibv_cq_ex", 0, "returned NULL");
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			context.release();
		}
		// EFA CQs do not store cq_context/channel in libibverbs' ibv_cq: the binding
		// keeps them itself.
		MemorySegment created = cq;
		EfaReaders efa = new EfaReaders(dv.reinterpret(Layouts.EFADV_CQ.byteSize() + 8), efaMask);
		return adopt(() -> new EfaCompletionQueue(context, created, attributes, efa, ProviderCalls.of(context)), () -> {
			efa.free();
			Native.callIntVerb(Ibverbs.DESTROY_CQ, created);
		});
	}

	/** The {@link EfaWcFlag} bits this CQ was created with. */
	public long efaWcFlags() {
		return efa.flags();
	}

	/** The {@code struct efadv_cq *} of this CQ. */
	public long efadvCqAddress() {
		return efa.efadvCqAddress();
	}

	@Override
	void destroyed() {
		super.destroyed();
		efa.free();
	}

}
