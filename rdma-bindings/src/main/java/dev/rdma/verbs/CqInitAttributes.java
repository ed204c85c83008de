package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import java.util.EnumSet;
import java.util.Set;

/**
 * {@code struct ibv_cq_init_attr_ex}: what {@link Context#createExtendedCompletionQueue}
 * and {@code EfaCompletionQueue.create} ({@code dev.rdma.verbs.efa}) pass to the
 * provider. {@code comp_mask} is derived: {@code IBV_CQ_INIT_ATTR_MASK_FLAGS} when
 * {@code flags} is not empty, {@code IBV_CQ_INIT_ATTR_MASK_PD} when a parent domain is
 * given. {@code cq_context} is owned by the binding.
 *
 * @param cqe minimum number of entries
 * @param channel completion channel, or null for a CQ without events
 * @param compVector completion vector, 0 .. {@code num_comp_vectors - 1}
 * @param wcFlags the completion fields the CQ must provide ({@code wc_flags})
 * @param flags {@code flags}
 * @param parentDomain a parent domain ({@link ProtectionDomain#isParentDomain()}), or
 * null
 */
public record CqInitAttributes(int cqe, @Nullable CompletionChannel channel, int compVector, Set<WcExFlag> wcFlags,
		Set<CqCreateFlag> flags, @Nullable ProtectionDomain parentDomain) {

	public static final int IBV_CQ_INIT_ATTR_MASK_FLAGS = 1;

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

	public long wcFlagsMask() {
		return WcExFlag.mask(wcFlags);
	}

	public int compMask() {
		return (flags.isEmpty() ? 0 : IBV_CQ_INIT_ATTR_MASK_FLAGS)
				| (parentDomain == null ? 0 : IBV_CQ_INIT_ATTR_MASK_PD);
	}
}
