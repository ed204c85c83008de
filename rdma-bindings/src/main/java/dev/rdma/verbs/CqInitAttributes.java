package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import java.util.EnumSet;
import java.util.Set;

/**
 * {@code struct ibv_cq_init_attr_ex}: what {@link Context#createExtendedCompletionQueue}
 * ({@code ibv_create_cq_ex}) and {@code EfaCompletionQueue.create}
 * ({@code efadv_create_cq}, {@code dev.rdma.verbs.efa}) pass to the provider.
 * {@code comp_mask} is derived: {@code IBV_CQ_INIT_ATTR_MASK_FLAGS} when {@code flags} is
 * not empty, {@code IBV_CQ_INIT_ATTR_MASK_PD} when a parent domain is given.
 *
 * <p>
 * <b>{@code cq_context} is always NULL</b> (and so is the one of {@code ibv_create_cq}):
 * the binding does not identify a CQ through it. {@link CompletionChannel#getEvent()}
 * maps the {@code struct ibv_cq *} that {@code ibv_get_cq_event} returns to the
 * {@link CompletionQueue} object of that address among the CQs registered with the
 * channel, and returns that object; the {@code cq_context} out-parameter of
 * {@code ibv_get_cq_event} is ignored. To carry your own identity or state with a CQ, use
 * {@link CompletionQueue#attach(Object)} and {@link CompletionQueue#attachment()} on the
 * object the event returns.
 *
 * <p>
 * The channel and the parent domain are checked when the CQ is created (open, of the same
 * context) and held open during the create.
 *
 * @param cqe minimum number of entries
 * @param channel completion channel, or null for a CQ without events
 * @param compVector {@code comp_vector}: the completion vector whose interrupt signals
 * the CQ's events, 0 .. {@link Context#numCompVectors()} - 1
 * @param wcFlags the completion fields the CQ must provide ({@code wc_flags})
 * @param flags {@code flags} ({@link CqCreateFlag}, {@code IBV_CREATE_CQ_ATTR_*})
 * @param parentDomain a parent domain ({@link ProtectionDomain#isParentDomain()}), or
 * null
 */
public record CqInitAttributes(int cqe, @Nullable CompletionChannel channel, int compVector, Set<WcExFlag> wcFlags,
		Set<CqCreateFlag> flags, @Nullable ProtectionDomain parentDomain) {

	/** {@code IBV_CQ_INIT_ATTR_MASK_FLAGS}: {@code flags} is valid. */
	public static final int IBV_CQ_INIT_ATTR_MASK_FLAGS = 1;

	/** {@code IBV_CQ_INIT_ATTR_MASK_PD}: {@code parent_domain} is valid. */
	public static final int IBV_CQ_INIT_ATTR_MASK_PD = 1 << 1;

	public CqInitAttributes {
		wcFlags = wcFlags == null || wcFlags.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(wcFlags));
		flags = flags == null || flags.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(flags));
		if (parentDomain != null && !parentDomain.isParentDomain()) {
			throw new IllegalArgumentException("parent_domain must be a parent domain (ibv_alloc_parent_domain), not "
					+ "a plain PD: " + parentDomain);
		}
	}

	/** {@code cqe} entries, no channel, vector 0, the standard wc_flags, no flags. */
	public static CqInitAttributes of(int cqe) {
		return new CqInitAttributes(cqe, null, 0, EnumSet.range(WcExFlag.BYTE_LEN, WcExFlag.DLID_PATH_BITS), Set.of(),
				null);
	}

	public CqInitAttributes withChannel(CompletionChannel channel) {
		return new CqInitAttributes(cqe, channel, compVector, wcFlags, flags, parentDomain);
	}

	public CqInitAttributes withCompVector(int compVector) {
		return new CqInitAttributes(cqe, channel, compVector, wcFlags, flags, parentDomain);
	}

	public CqInitAttributes withWcFlags(Set<WcExFlag> wcFlags) {
		return new CqInitAttributes(cqe, channel, compVector, wcFlags, flags, parentDomain);
	}

	public CqInitAttributes withFlags(Set<CqCreateFlag> flags) {
		return new CqInitAttributes(cqe, channel, compVector, wcFlags, flags, parentDomain);
	}

	public CqInitAttributes withParentDomain(ProtectionDomain parentDomain) {
		return new CqInitAttributes(cqe, channel, compVector, wcFlags, flags, parentDomain);
	}

	/**
	 * {@code ibv_cq_init_attr_ex.wc_flags}: the bits of {@link #wcFlags()}
	 * ({@link WcExFlag#bit()} or'ed; {@code IBV_WC_EX_WITH_*}), the fields the CQ's
	 * completions can be read for.
	 */
	public long wcFlagsMask() {
		return BitFlag.mask(wcFlags);
	}

	/**
	 * {@code ibv_cq_init_attr_ex.comp_mask}, derived:
	 * {@link #IBV_CQ_INIT_ATTR_MASK_FLAGS} when {@link #flags()} is not empty,
	 * {@link #IBV_CQ_INIT_ATTR_MASK_PD} when {@link #parentDomain()} is set (libibverbs
	 * supports no other bit).
	 */
	public int compMask() {
		return (flags.isEmpty() ? 0 : IBV_CQ_INIT_ATTR_MASK_FLAGS)
				| (parentDomain == null ? 0 : IBV_CQ_INIT_ATTR_MASK_PD);
	}
}
