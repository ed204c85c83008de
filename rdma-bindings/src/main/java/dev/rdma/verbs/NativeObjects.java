package dev.rdma.verbs;

import java.util.Map;

import dev.rdma.verbs.ffm.ObjectCounts;

/**
 * Counts every native object this binding opened and closed, per class, process-wide: a
 * leak check for applications and their tests (the starter's and the sample's tests use
 * it to prove that a context shut down, or a failed start-up, left nothing native open).
 * Public API, not plumbing: it reads only counters the native objects keep in Java.
 * Thread-safe; the counts never decrease. The connection manager's objects
 * ({@code dev.rdma.verbs.cm}) count here too.
 */
public final class NativeObjects {

	private NativeObjects() {
	}

	/** Objects opened and not yet closed, all classes together. */
	public static long open() {
		return ObjectCounts.open();
	}

	/** Objects opened so far, all classes together. */
	public static long opened() {
		return ObjectCounts.opened();
	}

	/** Open objects per class name, only the classes with at least one open. */
	public static Map<String, Long> openByType() {
		return ObjectCounts.openByType();
	}

}
