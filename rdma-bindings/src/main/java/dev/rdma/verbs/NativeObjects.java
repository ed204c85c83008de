package dev.rdma.verbs;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts every native object this binding opened and closed, per class, process-wide: a
 * leak check for applications and their tests (the starter's and the sample's tests use
 * it to prove that a context shut down, or a failed start-up, left nothing native open).
 * Public API, not plumbing: it reads only counters the native objects keep in Java.
 * Thread-safe; the counts never decrease.
 */
public final class NativeObjects {

	private static final Map<String, AtomicLong[]> COUNTS = new ConcurrentHashMap<>();

	private NativeObjects() {
	}

	static void opened(Class<?> type) {
		counters(type)[0].incrementAndGet();
	}

	static void closed(Class<?> type) {
		counters(type)[1].incrementAndGet();
	}

	private static AtomicLong[] counters(Class<?> type) {
		return COUNTS.computeIfAbsent(type.getSimpleName(),
				k -> new AtomicLong[] { new AtomicLong(), new AtomicLong() });
	}

	/** Objects opened and not yet closed, all classes together. */
	public static long open() {
		long n = 0;
		for (AtomicLong[] c : COUNTS.values()) {
			n += c[0].get() - c[1].get();
		}
		return n;
	}

	/** Objects opened so far, all classes together. */
	public static long opened() {
		return COUNTS.values().stream().mapToLong(c -> c[0].get()).sum();
	}

	/** Open objects per class name, only the classes with at least one open. */
	public static Map<String, Long> openByType() {
		Map<String, Long> out = new TreeMap<>();
		COUNTS.forEach((k, c) -> {
			long open = c[0].get() - c[1].get();
			if (open != 0) {
				out.put(k, open);
			}
		});
		return out;
	}

}
