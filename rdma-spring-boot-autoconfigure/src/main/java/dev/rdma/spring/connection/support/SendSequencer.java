package dev.rdma.spring.connection.support;

import java.util.ArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.SendWorkRequest;

/**
 * The send order of one connection and its posting, without a lock held across the post
 * (the send path of {@link PeerSends}). A sender that filled its buffer
 * {@linkplain #claim claims} the next place (sequence number) with an atomic increment
 * and {@linkplain #publish publishes} the buffer's entry there, then {@link #drive()}s:
 * the thread that wins the posting flag (a CAS) posts every published place from the
 * first unposted one up to the first place not published yet, in order, as one chain
 * ({@code ibv_post_send} of a list: one doorbell), and again while more is ready; a
 * thread that loses returns at once, its place taken care of by the winner, which checks
 * for published places again after it dropped the flag. A batch claims consecutive places
 * with one increment.
 *
 * <p>
 * <b>Ring.</b> Place {@code s} lives in slot {@code s % slots} (one slot per send buffer,
 * and one for the close's marker); a slot holds the entry (buffer index and flags) and
 * the sequence number it was published for. A place is claimed only with a send buffer in
 * hand and a slot is reused only once the poller gave back the place before it
 * ({@link SendCompletions#completedBefore}), so a slot is never overwritten before it was
 * posted and reclaimed.
 *
 * <p>
 * <b>Signaling</b> is decided by the posting thread, in post order (the interval counts
 * across chains and threads); the {@link Sink} sets each work request's flags. The
 * sequencer tells it whether a signaled SEND or WRITE is in flight (posted, and its place
 * not {@linkplain #reclaimed reclaimed} yet): its completion will give buffers back, so a
 * post that takes the last free buffer need not be signaled too. (A READ's buffer comes
 * back through its reader, which may not reap it soon: it does not count.)
 *
 * <p>
 * <b>Refusals.</b> When the provider refuses a chain at one element, the places from it
 * on are marked {@link #REFUSED} in the ring (the poller's reclaim passes over them) and
 * handed to the {@link Sink} (counted, buffers given back), except those of a batch
 * ({@link #OWNED}), whose outcome its owner reads with {@link #awaitOutcome} and handles
 * itself. Nothing is allocated per message.
 */
final class SendSequencer {

	/** Entry bit: an RDMA WRITE or READ, which completes itself. */
	static final int ONE_SIDED = 1 << 30;

	/** Entry bit: a message of a batch, whose owner handles its refusal. */
	static final int OWNED = 1 << 29;

	/** Entry bit in the ring: not posted (refused). */
	static final int REFUSED = 1 << 28;

	/** The bits of an entry that are the buffer index. */
	static final int INDEX = REFUSED - 1;

	/** Where posting goes, and what a refusal does; called by the posting thread. */
	interface Sink {

		/**
		 * The work request of {@code entry}, its flags set: signaled when
		 * {@code signalDue}, or when it must be for another reason (a sender may wait for
		 * a buffer, and {@code signaledInFlight} is false: no completion is coming that
		 * would give one back).
		 */
		SendWorkRequest prepare(int entry, boolean signalDue, boolean signaledInFlight);

		/**
		 * Posts {@code chain}, in order; returns how many were posted (all, or those
		 * before the element the provider refused). Never throws.
		 */
		int post(ArrayList<SendWorkRequest> chain);

		/** {@code entry} (not {@link #OWNED}) was not posted: count it, free it. */
		void refused(int entry);

	}

	private final Sink sink;

	private final ConnectionCounters counters;

	private final int signalInterval;

	private final AtomicLong claimed = new AtomicLong();

	/** Per slot: the entry of the place last published there. */
	private final AtomicIntegerArray entries;

	/** Per slot: the sequence number last published there (-1: none). */
	private final AtomicLongArray publishedAt;

	/**
	 * Per buffer index: (sequence << 1) | refused of its last post, written once its
	 * chain was posted (-1: none yet).
	 */
	private final AtomicLongArray outcome;

	private final AtomicBoolean posting = new AtomicBoolean();

	/** The first place not posted yet (written by the posting thread). */
	private volatile long next;

	/** Unsignaled posts since the last signaled one (posting thread). */
	private int sinceSignaled;

	/**
	 * The place of the last signaled SEND or WRITE posted, -1 when none (posting thread).
	 */
	private long lastSignaled = -1;

	/** The first place the poller has not reclaimed yet ({@link #reclaimed}). */
	private volatile long reclaimedTo;

	/** The chain being posted, and the entries of its elements (posting thread). */
	private final ArrayList<SendWorkRequest> chain;

	private final int[] chainEntries;

	private final int[] sinceAfter;

	private final long[] signaledAfter;

	/**
	 * @param slots one per send buffer, and one for the close's marker
	 * @param indexes buffer indexes that may be posted (marker included)
	 */
	SendSequencer(int slots, int indexes, int signalInterval, ConnectionCounters counters, Sink sink) {
		this.sink = sink;
		this.counters = counters;
		this.signalInterval = signalInterval;
		this.entries = new AtomicIntegerArray(slots);
		this.publishedAt = new AtomicLongArray(slots);
		this.outcome = new AtomicLongArray(indexes);
		for (int i = 0; i < slots; i++) {
			publishedAt.set(i, -1);
		}
		for (int i = 0; i < indexes; i++) {
			outcome.set(i, -1);
		}
		this.chain = new ArrayList<>(slots);
		this.chainEntries = new int[slots];
		this.sinceAfter = new int[slots];
		this.signaledAfter = new long[slots];
	}

	/** Claims {@code n} consecutive places; the first one's sequence number. */
	long claim(int n) {
		return claimed.getAndAdd(n);
	}

	/** Publishes {@code entry} at place {@code sequence} (claimed by this thread). */
	void publish(long sequence, int entry) {
		int slot = slot(sequence);
		entries.set(slot, entry);
		publishedAt.set(slot, sequence);
	}

	/**
	 * Posts what is ready unless another thread is posting (which then posts it): call
	 * after {@link #publish}.
	 */
	void drive() {
		while (posting.compareAndSet(false, true)) {
			try {
				drain();
			}
			finally {
				posting.set(false);
			}
			// a place published while this thread held the flag, by a thread whose CAS
			// failed: post it (or leave it to whoever holds the flag now)
			if (!published(next)) {
				return;
			}
		}
	}

	/**
	 * The entry at place {@code sequence}, once posted ({@link #REFUSED} set when it was
	 * not); for the poller's reclaim.
	 */
	int entry(long sequence) {
		return entries.get(slot(sequence));
	}

	/**
	 * Waits until the place {@code sequence} of buffer {@code index} (an {@link #OWNED}
	 * entry of the calling thread) was posted or refused; true when refused. The wait is
	 * for the thread posting now, or for a place ahead that is between its claim and its
	 * publication: both a few instructions away.
	 */
	boolean awaitOutcome(int index, long sequence) {
		int spins = 0;
		while (true) {
			long o = outcome.get(index);
			if ((o >> 1) >= sequence) {
				// a later sequence: the buffer was given back, so this place was posted
				// (a refused owned place keeps its buffer until its owner gives it back)
				return (o >> 1) == sequence && (o & 1) != 0;
			}
			drive();
			if (++spins < 64) {
				Thread.onSpinWait();
			}
			else {
				Thread.yield();
			}
		}
	}

	/**
	 * The poller reclaimed every place before {@code to} (their buffers are given back
	 * after this call): a signaled place before it is no longer in flight.
	 */
	void reclaimed(long to) {
		reclaimedTo = to;
	}

	/** Places claimed so far. */
	long claimed() {
		return claimed.get();
	}

	private int slot(long sequence) {
		return (int) (sequence % entries.length());
	}

	private boolean published(long sequence) {
		return publishedAt.get(slot(sequence)) == sequence;
	}

	/** Posts the published places from {@link #next} on, chain by chain. */
	private void drain() {
		long first = next;
		int max = chainEntries.length;
		while (true) {
			chain.clear();
			int since = sinceSignaled;
			long signaled = lastSignaled;
			int n = 0;
			while (n < max && published(first + n)) {
				int entry = entries.get(slot(first + n));
				SendWorkRequest wr = sink.prepare(entry, since + 1 >= signalInterval, signaled >= reclaimedTo);
				if (wr.hasFlag(SendWorkRequest.Flag.SIGNALED)) {
					since = 0;
					if (wr.opcode() != QueuePair.SendOpcode.RDMA_READ) {
						signaled = first + n;
					}
				}
				else {
					since++;
				}
				chainEntries[n] = entry;
				sinceAfter[n] = since;
				signaledAfter[n] = signaled;
				chain.add(wr);
				n++;
			}
			if (n == 0) {
				return;
			}
			int posted = sink.post(chain);
			counters.sendPosts.increment();
			counters.sendsPosted.add(posted);
			if (posted > 0) {
				sinceSignaled = sinceAfter[posted - 1];
				lastSignaled = signaledAfter[posted - 1];
			}
			for (int k = 0; k < n; k++) {
				int entry = chainEntries[k];
				long sequence = first + k;
				if (k >= posted) {
					entries.set(slot(sequence), entry | REFUSED);
				}
				outcome.set(entry & INDEX, (sequence << 1) | (k >= posted ? 1 : 0));
				if (k >= posted && (entry & OWNED) == 0) {
					sink.refused(entry);
				}
			}
			first += n;
			next = first;
		}
	}

}
