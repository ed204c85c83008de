package dev.rdma.verbs;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/** The var handles of the package's lock-free fields, found once per class. */
final class VarHandles {

	private VarHandles() {
	}

	/**
	 * The var handle of field {@code name} (of {@code type}) of the class that owns
	 * {@code lookup} (its own {@code MethodHandles.lookup()}, which reaches its private
	 * fields); a field that is not there fails the class's initialization.
	 */
	static VarHandle field(MethodHandles.Lookup lookup, String name, Class<?> type) {
		try {
			return lookup.findVarHandle(lookup.lookupClass(), name, type);
		}
		catch (ReflectiveOperationException e) {
			throw new ExceptionInInitializerError(e);
		}
	}

}
