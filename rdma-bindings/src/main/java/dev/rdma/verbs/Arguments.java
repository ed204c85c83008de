package dev.rdma.verbs;

/**
 * Argument checks shared by the value types and the native objects (its own class so that
 * a value type such as {@link AddressHandle.Attributes} does not depend on
 * {@link QueuePair} for them).
 */
final class Arguments {

	private Arguments() {
	}

	/**
	 * Throws {@link IllegalArgumentException} naming {@code name} unless
	 * {@code min <= value <= max}.
	 */
	static void requireRange(String name, long value, long min, long max) {
		if (value < min || value > max) {
			throw new IllegalArgumentException(name + " must be " + min + ".." + max + ", got " + value);
		}
	}

	/**
	 * Throws {@link IndexOutOfBoundsException} unless {@code offset .. offset + length}
	 * lies within a region of {@code regionSize} bytes, without overflow (an offset near
	 * {@link Long#MAX_VALUE} made {@code offset + length} negative, and the post went
	 * through).
	 */
	static void requireWithin(long regionSize, long offset, int length) {
		if (offset < 0 || length < 0 || offset > regionSize - length) {
			throw new IndexOutOfBoundsException(
					"offset " + offset + " + length " + length + " outside the " + regionSize + "-byte memory region");
		}
	}

}
