package dev.rdma.verbs;

import java.util.Map;

import dev.rdma.verbs.ffm.ObjectCounts;

/**
 * Counts every native object this binding opened and closed, per class, process-wide:
 * those of this package and those of the connection manager ({@code dev.rdma.verbs.cm}).
 * Tests and the Spring layer use it to prove that nothing native is left open.
 */
public final class NativeObjects {

	private NativeObjects() {
	}

	static void opened(Class<?> type) {
		ObjectCounts.opened(type);
	}

	static void closed(Class<?> type) {
		ObjectCounts.closed(type);
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
