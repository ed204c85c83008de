package dev.rdma.verbs.cm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.jspecify.annotations.Nullable;

/**
 * The ids of an event channel, by native address (to dispatch events) and in creation
 * order (to close them newest first). Thread-safe.
 *
 * <p>
 * librdmacm may give a new id the address of one just destroyed. An id is therefore
 * removed only while the address still maps to that same id: the removal of a destroyed
 * id that runs after its address was reused leaves the new id registered (removing by
 * address alone dropped the new id's events).
 */
final class IdRegistry<V> {

	private final Map<Long, V> byAddress = new ConcurrentHashMap<>();

	private final List<V> order = new ArrayList<>();

	void add(long address, V id) {
		byAddress.put(address, id);
		synchronized (order) {
			order.add(id);
		}
	}

	@Nullable V get(long address) {
		return byAddress.get(address);
	}

	/**
	 * Removes {@code id}; its address stays registered when it now maps to another id.
	 */
	void remove(long address, V id) {
		byAddress.remove(address, id);
		synchronized (order) {
			order.remove(id);
		}
	}

	/** The registered ids, oldest first. */
	List<V> snapshot() {
		synchronized (order) {
			return new ArrayList<>(order);
		}
	}

	/** The registered addresses (for diagnostics). */
	Set<Long> addresses() {
		return byAddress.keySet();
	}

}
