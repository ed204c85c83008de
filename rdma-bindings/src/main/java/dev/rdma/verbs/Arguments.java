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

}
