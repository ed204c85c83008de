package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.CqCreateCall;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The creation of an extended CQ with a provider's verb ({@code ibv_create_cq_ex},
 * {@code efadv_create_cq}), behind {@link ExtendedCompletionQueue}'s
 * {@code createNative}: the checks of the channel and parent domain, the
 * {@code struct ibv_cq_init_attr_ex}, the call with errno captured (cleared first: a
 * provider may return NULL without setting it), and the check that the provider set the
 * iterator pointers, the CQ destroyed otherwise so that nothing created before a failure
 * leaks.
 */
final class CqExCreation {

	private CqExCreation() {
	}

	/** See {@link ExtendedCompletionQueue#createNative}. */
	static MemorySegment createNative(Context context, CqInitAttributes attributes, String verb, String detail,
			CqCreateCall call) {
		CompletionQueue.checkChannel(context, attributes.channel());
		checkParentDomain(context, attributes.parentDomain());
		MemorySegment cq;
		// the caller (ExtendedCompletionQueue.createHolding) holds the context open until
		// the CQ is wrapped and registered
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = fill(a, attributes);
			MemorySegment capture = Native.allocateCapture(a);
			Libc.clearErrno();
			cq = call.create(a, capture, context.handle, attr);
			if (Native.isNull(cq)) {
				int errno = Native.errno(capture);
				throw new VerbsException(verb, errno,
						LockedMemory.detail(verb, errno, describe(context, attributes) + detail));
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		return checkIterator(cq.reinterpret(Layouts.IBV_CQ_EX.byteSize()), verb);
	}

	static void checkParentDomain(Context context, @Nullable ProtectionDomain parentDomain) {
		if (parentDomain != null) {
			parentDomain.ensureOpen();
			if (parentDomain.context() != context) {
				throw new IllegalArgumentException(
						"parent_domain " + parentDomain + " belongs to another context than " + context.deviceName());
			}
		}
	}

	/**
	 * Checks what the provider returned before any Java object wraps it: the iterator
	 * pointers must be set. On failure destroys the CQ and throws.
	 */
	private static MemorySegment checkIterator(MemorySegment cq, String verb) {
		var l = Layouts.IBV_CQ_EX;
		for (String f : new String[] { "start_poll", "next_poll", "end_poll" }) {
			if (Native.isNull(cq.get(ADDRESS, Layouts.off(l, f)))) {
				try {
					int ignored = (int) Ibverbs.DESTROY_CQ.invokeExact(cq);
				}
				catch (Throwable t) {
					throw new IllegalStateException(t);
				}
				throw new VerbsException(verb, Errno.EOPNOTSUPP, "the provider left " + f + " NULL");
			}
		}
		return cq;
	}

	private static MemorySegment fill(Arena a, CqInitAttributes attributes) {
		var l = Layouts.IBV_CQ_INIT_ATTR_EX;
		MemorySegment attr = a.allocate(l);
		attr.set(JAVA_INT, Layouts.off(l, "cqe"), attributes.cqe());
		attr.set(ADDRESS, Layouts.off(l, "cq_context"), MemorySegment.NULL);
		attr.set(ADDRESS, Layouts.off(l, "channel"),
				attributes.channel() == null ? MemorySegment.NULL : attributes.channel().handle);
		attr.set(JAVA_INT, Layouts.off(l, "comp_vector"), attributes.compVector());
		attr.set(JAVA_LONG, Layouts.off(l, "wc_flags"), attributes.wcFlagsMask());
		attr.set(JAVA_INT, Layouts.off(l, "comp_mask"), attributes.compMask());
		attr.set(JAVA_INT, Layouts.off(l, "flags"), (int) BitFlag.mask(attributes.flags()));
		attr.set(ADDRESS, Layouts.off(l, "parent_domain"),
				attributes.parentDomain() == null ? MemorySegment.NULL : attributes.parentDomain().handle);
		return attr;
	}

	private static String describe(Context context, CqInitAttributes a) {
		return "cqe=" + a.cqe() + ", comp_vector=" + a.compVector() + " of " + context.numCompVectors() + ", wc_flags="
				+ a.wcFlags() + " (0x" + Long.toHexString(a.wcFlagsMask()) + "), flags=" + a.flags() + ", device "
				+ context.deviceName();
	}

}
