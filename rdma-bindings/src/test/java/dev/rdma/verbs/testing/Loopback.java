package dev.rdma.verbs.testing;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;

/** The tests' name for {@link LoopbackQueuePair}. */
public final class Loopback extends LoopbackQueuePair {

	public Loopback(Context context, CompletionQueue sendCq, CompletionQueue recvCq, int depth, int slotSize) {
		super(context, sendCq, recvCq, depth, slotSize);
	}

}
