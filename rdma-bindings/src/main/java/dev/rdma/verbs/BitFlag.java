package dev.rdma.verbs;

import java.util.Collection;
import java.util.Objects;

/**
 * A flag of a native bit field: an enum constant standing for one bit, such as
 * {@link WcExFlag} ({@code ibv_cq_init_attr_ex.wc_flags}), {@link CqCreateFlag}
 * ({@code ibv_cq_init_attr_ex.flags}) or {@code EfaWcFlag}
 * ({@code efadv_cq_init_attr.wc_flags}); {@link #mask(Collection)} makes the field's
 * value of a set of them. Immutable, thread-safe.
 */
public interface BitFlag {

	/**
	 * The flag's bit in its native field.
	 * @return the bit, a power of two
	 */
	long bit();

	/**
	 * The native field's value of {@code flags}: their bits or'ed, 0 for an empty
	 * collection.
	 * @param flags the flags, none null
	 * @return the mask
	 * @throws NullPointerException when {@code flags} or one of them is null
	 */
	static long mask(Collection<? extends BitFlag> flags) {
		long m = 0;
		for (BitFlag f : flags) {
			m |= Objects.requireNonNull(f, "flag").bit();
		}
		return m;
	}

}
