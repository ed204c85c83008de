package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

/**
 * A receive work request for {@link QueuePair#postRecv(ReceiveWorkRequest)}
 * ({@code ibv_post_recv}): a native {@code struct ibv_recv_wr} with one
 * {@code struct ibv_sge}, filled once and posted as often as needed, like pyverbs'
 * {@code RecvWR}. Posting allocates nothing. Every setter checks its arguments and
 * returns {@code this}. A new work request has {@code wr_id} 0 and no buffer; a post
 * needs one ({@link #buffer(MemoryRegion, long, int)}). On a UD QP the first
 * {@value QueuePair#GRH_BYTES} bytes of the buffer receive the GRH, the payload follows.
 * The post refuses, before anything is posted, a closed memory region.
 *
 * <p>
 * <b>Threads.</b> Not thread-safe: fill and post it on one thread at a time; handing it
 * to another thread needs a happens-before edge (a lock, a queue). A post of a work
 * request that another post is using is refused with {@link IllegalStateException}.
 * Different work requests may be posted to one QP from any number of threads.
 *
 * <p>
 * <b>Lifetime.</b> The native memory (about 60 bytes) belongs to the work request and is
 * returned once it is unreachable; {@link #close()} ends its use (a post afterwards is
 * refused with {@link IllegalStateException}). The provider copies the work request
 * during {@code ibv_post_recv}, so it may be changed and posted again as soon as the post
 * returns; the buffer it names belongs to the device until the receive completes.
 * {@link #memoryRegion()} is null until set.
 */
public final class ReceiveWorkRequest extends WorkRequest<ReceiveWorkRequest> {

	/**
	 * The memory region a post holds open while it runs (set and cleared under the
	 * claim).
	 */
	@Nullable MemoryRegion held;

	/** A receive without a buffer (see the class comment). */
	public ReceiveWorkRequest() {
		super(Layouts.IBV_RECV_WR);
	}

}
