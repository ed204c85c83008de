package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * What a {@link SendWorkRequest} and a {@link ReceiveWorkRequest} share: a native work
 * request struct with one {@code struct ibv_sge} and the {@code bad_wr} out-pointer in
 * one allocation, its {@code wr_id}, its buffer, its claim by a post and its close.
 * Posting allocates nothing. Every setter checks its arguments and returns the work
 * request.
 *
 * <p>
 * <b>Threads.</b> Not thread-safe: fill and post it on one thread at a time; handing it
 * to another thread needs a happens-before edge (a lock, a queue). A post of a work
 * request that another post is using is refused with {@link IllegalStateException}.
 * Different work requests may be posted to one QP from any number of threads.
 *
 * <p>
 * <b>Lifetime.</b> The native memory belongs to the work request and is returned once it
 * is unreachable; {@link #close()} ends its use (a post afterwards is refused with
 * {@link IllegalStateException}). {@link #memoryRegion()} is null until set.
 *
 * @param <W> the work request's own type, which the setters return
 */
public abstract sealed class WorkRequest<W extends WorkRequest<W>> implements AutoCloseable
		permits SendWorkRequest, ReceiveWorkRequest {

	private static final long SGE_ADDR = Layouts.off(Layouts.IBV_SGE, "addr");

	private static final long SGE_LENGTH = Layouts.off(Layouts.IBV_SGE, "length");

	private static final long SGE_LKEY = Layouts.off(Layouts.IBV_SGE, "lkey");

	/**
	 * The work request struct ({@code ibv_send_wr} or {@code ibv_recv_wr}), its
	 * {@code ibv_sge} and the {@code bad_wr} out-pointer.
	 */
	final MemorySegment wr;

	final MemorySegment sge;

	final MemorySegment badWr;

	final WorkRequestClaim claim = new WorkRequestClaim();

	private final long wrIdOffset;

	long wrId;

	@Nullable MemoryRegion mr;

	long offset;

	int length;

	WorkRequest(StructLayout layout) {
		// one allocation, so that the segment passed to the post keeps all of it
		// reachable
		MemorySegment all = Arena.ofAuto()
			.allocate(layout.byteSize() + Layouts.IBV_SGE.byteSize() + ADDRESS.byteSize(), 8);
		this.wr = all.asSlice(0, layout);
		this.sge = all.asSlice(layout.byteSize(), Layouts.IBV_SGE);
		this.badWr = all.asSlice(layout.byteSize() + Layouts.IBV_SGE.byteSize(), ADDRESS);
		this.wrIdOffset = Layouts.off(layout, "wr_id");
		wr.set(ADDRESS, Layouts.off(layout, "sg_list"), sge);
		wr.set(JAVA_INT, Layouts.off(layout, "num_sge"), 1);
	}

	@SuppressWarnings("unchecked")
	private W self() {
		return (W) this;
	}

	/**
	 * {@code wr_id}: returned in the completion.
	 * @param wrId any value the application chooses
	 * @return this work request
	 */
	public W wrId(long wrId) {
		this.wrId = wrId;
		return self();
	}

	/**
	 * The buffer ({@code sg_list[0]}): {@code length} bytes at {@code offset} of
	 * {@code mr} (for a receive, up to {@code length}; for {@link SendOpcode#RDMA_READ}
	 * the bytes read land there).
	 * @param mr the memory region of the buffer
	 * @param offset the buffer's offset in {@code mr}
	 * @param length the buffer's length in bytes
	 * @return this work request
	 * @throws IllegalStateException when {@code mr} is closed
	 * @throws IndexOutOfBoundsException when {@code offset .. offset + length} is not
	 * within {@code mr}
	 */
	public W buffer(MemoryRegion mr, long offset, int length) {
		Objects.requireNonNull(mr, "mr");
		Arguments.requireWithin(mr.buffer().byteSize(), offset, length);
		this.mr = mr;
		this.offset = offset;
		this.length = length;
		return self();
	}

	/**
	 * The {@code wr_id} set.
	 * @return the {@code wr_id} ({@code 0} until set)
	 */
	public long wrId() {
		return wrId;
	}

	/**
	 * The memory region of the buffer.
	 * @return the memory region, or null before {@link #buffer} was called
	 */
	public @Nullable MemoryRegion memoryRegion() {
		return mr;
	}

	/**
	 * The buffer's offset in its memory region.
	 * @return the offset ({@code 0} until set)
	 */
	public long offset() {
		return offset;
	}

	/**
	 * The buffer's length.
	 * @return the length in bytes ({@code 0} until set)
	 */
	public int length() {
		return length;
	}

	/**
	 * Writes {@code wr_id} and the {@code ibv_sge} from values the post read once and
	 * checked; with the work request claimed and the memory region held.
	 */
	final void fillBuffer(long wrId, long address, int length, int lkey) {
		sge.set(JAVA_LONG, SGE_ADDR, address);
		sge.set(JAVA_INT, SGE_LENGTH, length);
		sge.set(JAVA_INT, SGE_LKEY, lkey);
		wr.set(JAVA_LONG, wrIdOffset, wrId);
	}

	/**
	 * Whether the work request is closed.
	 * @return true once {@link #close()} was called
	 */
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

	/** What {@link #toString()} writes after the {@code wr_id}; empty here. */
	String describe() {
		return "";
	}

	@Override
	public String toString() {
		return getClass().getSimpleName() + "[wr_id " + wrId + describe() + (claim.isClosed() ? ", closed]" : "]");
	}

}
