package dev.rdma.spring.listener;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Starting a group of components all or none, as the listener endpoint registry starts
 * its containers and the connection registry its connections.
 */
public final class Lifecycles {

	private Lifecycles() {
	}

	/**
	 * Starts each of {@code items} in order with {@code start}; when one fails,
	 * {@code stop} is handed the ones started so far (in start order) and the failure is
	 * rethrown.
	 * @param <T> the components' type
	 * @param items the components, in start order
	 * @param start starts one component
	 * @param stop stops the components started before a failure
	 */
	public static <T> void startAll(Iterable<T> items, Consumer<? super T> start, Consumer<List<T>> stop) {
		List<T> started = new ArrayList<>();
		try {
			for (T item : items) {
				start.accept(item);
				started.add(item);
			}
		}
		catch (RuntimeException ex) {
			stop.accept(started);
			throw ex;
		}
	}

}
