package dev.rdma.verbs.ffm;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The process-wide count of native objects opened and closed, per class name: the state
 * behind {@code dev.rdma.verbs.NativeObjects}, kept here so that every package of the
 * binding (the verbs and the connection manager) counts into the same place.
 */
public final class ObjectCounts {

	private static final Map<String, AtomicLong[]> COUNTS = new ConcurrentHashMap<>();

	private ObjectCounts() {
	}

	public static void opened(Class<?> type) {
		counters(type)[0].incrementAndGet();
	}

	public static void closed(Class<?> type) {
		counters(type)[1].incrementAndGet();
	}

	private static AtomicLong[] counters(Class<?> type) {
		return COUNTS.computeIfAbsent(type.getSimpleName(),
				k -> new AtomicLong[] { new AtomicLong(), new AtomicLong() });
	}

	public static long open() {
		long n = 0;
		for (AtomicLong[] c : COUNTS.values()) {
			n += c[0].get() - c[1].get();
		}
		return n;
	}

	public static long opened() {
		return COUNTS.values().stream().mapToLong(c -> c[0].get()).sum();
	}

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
