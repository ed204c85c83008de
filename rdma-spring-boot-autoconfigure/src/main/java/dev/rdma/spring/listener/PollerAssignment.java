package dev.rdma.spring.listener;

/**
 * Which thread of a {@link PollerGroup} a new queue goes to; a pure function, so that the
 * rule is tested on its own.
 *
 * <ol>
 * <li>A queue whose completion channel already has a queue on a thread of the group goes
 * to that thread: a channel is one fd with one stream of events, and on two threads'
 * epoll sets every event would wake both.</li>
 * <li>Otherwise the least loaded thread (fewest queues), so the loads never differ by
 * more than one queue (channels shared by several queues aside).</li>
 * <li>Among equally loaded threads, where the device has several completion vectors, the
 * thread {@code compVector mod threads} or the next one after it: queues of one vector
 * (one interrupt, usually one CPU) gather on one thread, different vectors spread over
 * the threads. With one vector, the lowest index.</li>
 * </ol>
 */
public final class PollerAssignment {

	private PollerAssignment() {
	}

	/**
	 * @param loads queues per thread now (length = the group's threads)
	 * @param channelThread the thread that already polls a queue of the same channel, or
	 * -1
	 * @param compVector the queue's completion vector
	 * @param numCompVectors the device's {@code num_comp_vectors}
	 * @return the index of the thread
	 */
	public static int choose(int[] loads, int channelThread, int compVector, int numCompVectors) {
		if (loads.length == 0) {
			throw new IllegalArgumentException("a group has at least one thread");
		}
		if (channelThread >= 0 && channelThread < loads.length) {
			return channelThread;
		}
		int min = Integer.MAX_VALUE;
		for (int load : loads) {
			min = Math.min(min, load);
		}
		int start = numCompVectors > 1 ? Math.floorMod(compVector, loads.length) : 0;
		for (int i = 0; i < loads.length; i++) {
			int t = (start + i) % loads.length;
			if (loads[t] == min) {
				return t;
			}
		}
		throw new AssertionError("no least loaded thread");
	}

}
