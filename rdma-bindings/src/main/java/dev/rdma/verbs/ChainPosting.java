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
 * The posts of work requests, one or a chain, shared by a {@link QueuePair}
 * ({@code ibv_post_send}, {@code ibv_post_recv}) and a {@link SharedReceiveQueue}
 * ({@code ibv_post_srq_recv}): the claim, the holds, the call and the finding of
 * {@code bad_wr} in a chain, around a {@link Preparation} of each kind of work request. A
 * chain is linked through the {@code next} pointers of the work requests' own native
 * structs for the call and unlinked afterwards; nothing is allocated.
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

	/**
	 * What a post does with each work request around the call: {@link #prepare} reads its
	 * fields once, checks them, holds what it names open and writes its native struct
	 * ({@code next} NULL; on a throw nothing is held); {@link #release} lets go of what
	 * prepare held. One instance per kind of post, made once: a post allocates nothing.
	 */
	interface Preparation<W extends WorkRequest<W>> {

		/** The offset of {@code next} in the work request's native struct. */
		long nextOffset();

		void prepare(W wr, String verb, int index);

		void release(W wr);

	}

	/** The receives' preparation: {@code ibv_recv_wr}, a memory region held. */
	static final Preparation<ReceiveWorkRequest> RECEIVE = new Preparation<>() {

		@Override
		public long nextOffset() {
			return RECV_NEXT;
		}

		@Override
		public void prepare(ReceiveWorkRequest wr, String verb, int index) {
			prepareRecv(wr, verb, index);
		}

		@Override
		public void release(ReceiveWorkRequest wr) {
			releaseRecv(wr);
		}

	};

	/**
	 * Posts one work request through the provider's {@code fn} ({@code post_send},
	 * {@code post_recv} or {@code post_srq_recv} of {@code ops}) on {@code target}.
	 */
	static <W extends WorkRequest<W>> void post(NativeObject target, MemorySegment fn, String verb, W wr,
			Preparation<W> preparation) {
		Objects.requireNonNull(wr, "wr");
		wr.claim.claim(verb, wr);
		try {
			target.acquire();
			try {
				preparation.prepare(wr, verb, -1);
				try {
					int rc = (int) Ibverbs.FP_POST.invokeExact(fn, target.handle, wr.wr, wr.badWr);
					if (rc != 0) {
						throw new VerbsException(verb, rc, target.describe() + " wr_id " + wr.wrId);
					}
				}
				finally {
					preparation.release(wr);
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

	/**
	 * Posts {@code wrs} as one chain (linked through their structs' {@code next},
	 * unlinked afterwards); a refusal names the element {@code bad_wr} points at and that
	 * the ones before it were posted ({@link ChainPostException}).
	 */
	static <W extends WorkRequest<W>> void postChain(NativeObject target, MemorySegment fn, String verb, List<W> wrs,
			Preparation<W> preparation) {
		int n = wrs.size();
		if (n == 0) {
			throw new IllegalArgumentException(verb + ": the chain of work requests is empty");
		}
		if (n == 1) {
			// the common chain of one (a ping-pong's re-post, a single send): the single
			// post, without linking and the bad_wr search; its refusal as a chain's
			W only = Objects.requireNonNull(wrs.get(0), "wrs element");
			try {
				post(target, fn, verb, only, preparation);
			}
			catch (ChainPostException ex) {
				throw ex;
			}
			catch (VerbsException ex) {
				throw new ChainPostException(verb, ex.errno(), 0, 1, only.wrId, target.describe());
			}
			return;
		}
		long next = preparation.nextOffset();
		int claimed = 0;
		int prepared = 0;
		try {
			for (; claimed < n; claimed++) {
				W wr = Objects.requireNonNull(wrs.get(claimed), "wrs element");
				wr.claim.claim(verb, wr);
			}
			target.acquire();
			try {
				for (; prepared < n; prepared++) {
					W wr = wrs.get(prepared);
					preparation.prepare(wr, verb, prepared);
					if (prepared > 0) {
						wrs.get(prepared - 1).wr.set(ADDRESS, next, wr.wr);
					}
				}
				W first = wrs.get(0);
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
					W wr = wrs.get(i);
					wr.wr.set(ADDRESS, next, MemorySegment.NULL);
					preparation.release(wr);
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
