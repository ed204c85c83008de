package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Receive posts shared by a {@link QueuePair} ({@code ibv_post_recv}) and a
 * {@link SharedReceiveQueue} ({@code ibv_post_srq_recv}), one work request or a chain,
 * and the finding of {@code bad_wr} in a chain. A chain is linked through the
 * {@code next} pointers of the work requests' own native structs for the call and
 * unlinked afterwards; nothing is allocated.
 */
final class ChainPosting {

	static final long RECV_NEXT = Layouts.off(Layouts.IBV_RECV_WR, "next");

	static final long SEND_NEXT = Layouts.off(Layouts.IBV_SEND_WR, "next");

	private ChainPosting() {
	}

	/** " (element i of the chain)" on the error path of a chain, "" for one post. */
	static String at(int index) {
		return index < 0 ? "" : " (element " + index + " of the chain)";
	}

	static void postRecv(NativeObject target, MemorySegment fn, String verb, ReceiveWorkRequest wr) {
		Objects.requireNonNull(wr, "wr");
		wr.claim.claim(verb, wr);
		try {
			target.acquire();
			try {
				prepareRecv(wr, verb, -1);
				try {
					int rc = (int) Ibverbs.FP_POST.invokeExact(fn, target.handle, wr.wr, wr.badWr);
					if (rc != 0) {
						throw new VerbsException(verb, rc, target.describe() + " wr_id " + wr.wrId);
					}
				}
				finally {
					releaseRecv(wr);
				}
			}
			finally {
				target.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			wr.claim.unclaim();
		}
	}

	static void postRecvChain(NativeObject target, MemorySegment fn, String verb, List<ReceiveWorkRequest> wrs) {
		int n = wrs.size();
		if (n == 0) {
			throw new IllegalArgumentException(verb + ": the chain of work requests is empty");
		}
		int claimed = 0;
		int prepared = 0;
		try {
			for (; claimed < n; claimed++) {
				ReceiveWorkRequest wr = Objects.requireNonNull(wrs.get(claimed), "wrs element");
				wr.claim.claim(verb, wr);
			}
			target.acquire();
			try {
				for (; prepared < n; prepared++) {
					ReceiveWorkRequest wr = wrs.get(prepared);
					prepareRecv(wr, verb, prepared);
					if (prepared > 0) {
						wrs.get(prepared - 1).wr.set(ADDRESS, RECV_NEXT, wr.wr);
					}
				}
				ReceiveWorkRequest first = wrs.get(0);
				int rc = (int) Ibverbs.FP_POST.invokeExact(fn, target.handle, first.wr, first.badWr);
				if (rc != 0) {
					long bad = first.badWr.get(ADDRESS, 0).address();
					int index = -1;
					for (int i = 0; i < n && index < 0; i++) {
						if (wrs.get(i).wr.address() == bad) {
							index = i;
						}
					}
					throw new ChainPostException(verb, rc, index, n, index < 0 ? 0 : wrs.get(index).wrId,
							target.describe());
				}
			}
			finally {
				for (int i = 0; i < prepared; i++) {
					ReceiveWorkRequest wr = wrs.get(i);
					wr.wr.set(ADDRESS, RECV_NEXT, MemorySegment.NULL);
					releaseRecv(wr);
				}
				target.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			for (int i = 0; i < claimed; i++) {
				wrs.get(i).claim.unclaim();
			}
		}
	}

	/**
	 * Reads the work request's fields once, checks them, holds its memory region and
	 * writes its native struct ({@code next} NULL). On a throw nothing is held.
	 */
	static void prepareRecv(ReceiveWorkRequest wr, String verb, int index) {
		long wrId = wr.wrId;
		@Nullable MemoryRegion mr = wr.mr;
		long offset = wr.offset;
		int length = wr.length;
		if (mr == null) {
			throw new IllegalStateException(
					verb + ": " + wr + " has no buffer (ReceiveWorkRequest.buffer(mr, offset, length))" + at(index));
		}
		mr.acquire();
		try {
			Arguments.requireWithin(mr.buffer().byteSize(), offset, length);
			wr.fillBuffer(wrId, mr.bufferAddress() + offset, length, mr.lkey());
			wr.wr.set(ADDRESS, RECV_NEXT, MemorySegment.NULL);
			wr.held = mr;
		}
		catch (RuntimeException e) {
			mr.release();
			throw e;
		}
	}

	static void releaseRecv(ReceiveWorkRequest wr) {
		MemoryRegion mr = wr.held;
		if (mr != null) {
			wr.held = null;
			mr.release();
		}
	}

}
