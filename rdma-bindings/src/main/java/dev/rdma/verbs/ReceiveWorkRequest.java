package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

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
public final class ReceiveWorkRequest implements AutoCloseable {

	private static final long WR_ID = Layouts.off(Layouts.IBV_RECV_WR, "wr_id");

	private static final long SG_LIST = Layouts.off(Layouts.IBV_RECV_WR, "sg_list");

	private static final long NUM_SGE = Layouts.off(Layouts.IBV_RECV_WR, "num_sge");

	private static final long SGE_ADDR = Layouts.off(Layouts.IBV_SGE, "addr");

	private static final long SGE_LENGTH = Layouts.off(Layouts.IBV_SGE, "length");

	private static final long SGE_LKEY = Layouts.off(Layouts.IBV_SGE, "lkey");

	/**
	 * {@code struct ibv_recv_wr}, its {@code ibv_sge} and the {@code bad_wr} out-pointer.
	 */
	final MemorySegment wr;

	final MemorySegment sge;

	final MemorySegment badWr;

	final WorkRequestClaim claim = new WorkRequestClaim();

	long wrId;

	@Nullable MemoryRegion mr;

	long offset;

	int length;

	/**
	 * The memory region a post holds open while it runs (set and cleared under the
	 * claim).
	 */
	@Nullable MemoryRegion held;

	/** A receive without a buffer (see the class comment). */
	public ReceiveWorkRequest() {
		// one allocation, so that the segment passed to ibv_post_recv keeps all of it
		// reachable
		MemorySegment all = Arena.ofAuto()
			.allocate(Layouts.IBV_RECV_WR.byteSize() + Layouts.IBV_SGE.byteSize() + ADDRESS.byteSize(), 8);
		this.wr = all.asSlice(0, Layouts.IBV_RECV_WR);
		this.sge = all.asSlice(Layouts.IBV_RECV_WR.byteSize(), Layouts.IBV_SGE);
		this.badWr = all.asSlice(Layouts.IBV_RECV_WR.byteSize() + Layouts.IBV_SGE.byteSize(), ADDRESS);
		wr.set(ADDRESS, SG_LIST, sge);
		wr.set(JAVA_INT, NUM_SGE, 1);
	}

	/** {@code wr_id}: returned in the completion. */
	public ReceiveWorkRequest wrId(long wrId) {
		this.wrId = wrId;
		return this;
	}

	/**
	 * The buffer ({@code sg_list[0]}): up to {@code length} bytes at {@code offset} of
	 * {@code mr}.
	 * @throws IllegalStateException when {@code mr} is closed
	 * @throws IndexOutOfBoundsException when {@code offset .. offset + length} is not
	 * within {@code mr}
	 */
	public ReceiveWorkRequest buffer(MemoryRegion mr, long offset, int length) {
		Objects.requireNonNull(mr, "mr");
		Arguments.requireWithin(mr.buffer().byteSize(), offset, length);
		this.mr = mr;
		this.offset = offset;
		this.length = length;
		return this;
	}

	public long wrId() {
		return wrId;
	}

	/** The memory region of the buffer, or null before {@link #buffer} was called. */
	public @Nullable MemoryRegion memoryRegion() {
		return mr;
	}

	public long offset() {
		return offset;
	}

	public int length() {
		return length;
	}

	/**
	 * Writes the native struct from values the post read once and checked; with the work
	 * request claimed and the memory region held.
	 */
	void fill(long wrId, long address, int length, int lkey) {
		fillSge(sge, address, length, lkey);
		wr.set(JAVA_LONG, WR_ID, wrId);
	}

	static void fillSge(MemorySegment sge, long address, int length, int lkey) {
		sge.set(JAVA_LONG, SGE_ADDR, address);
		sge.set(JAVA_INT, SGE_LENGTH, length);
		sge.set(JAVA_INT, SGE_LKEY, lkey);
	}

	/** True once {@link #close()} was called. */
	public boolean isClosed() {
		return claim.isClosed();
	}

	/**
	 * Ends the use of the work request: later posts are refused. Idempotent and
	 * thread-safe; a post in flight on another thread is waited for.
	 */
	@Override
	public void close() {
		claim.close();
	}

	@Override
	public String toString() {
		return "ReceiveWorkRequest[wr_id " + wrId + (claim.isClosed() ? ", closed]" : "]");
	}

}
