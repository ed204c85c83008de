package dev.rdma.spring.connection.support;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.SendWorkRequest;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The send order without a lock across the post: places claimed by several threads are
 * posted exactly once each, in claim order (so in each thread's order), as chains of
 * whatever is ready; a batch's consecutive places go out in one post; signaling counts
 * across chains; a chain refused at one element reports exactly it and the ones after it
 * (marked in the ring, handed to the sink or, for a batch, to its owner), and the
 * counters say how many work requests were posted in how many posts.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SendSequencerTests {

	/**
	 * A fake provider: records the payload of each posted element (by buffer index) and
	 * the size of each chain, gives a posted buffer back at once (as a completion would),
	 * refuses the chain at element {@link #refuseAt} when set.
	 */
	static final class FakeSink implements SendSequencer.Sink {

		final SendWorkRequest[] wrs;

		final Map<SendWorkRequest, Integer> indexOf = new HashMap<>();

		final long[] payload;

		final List<Long> posted = new ArrayList<>();

		final List<Integer> chains = new ArrayList<>();

		final List<Boolean> signaled = new ArrayList<>();

		/** What the sequencer told each prepare: a signaled SEND or WRITE in flight. */
		final List<Boolean> signaledInFlight = new ArrayList<>();

		/** Buffer indexes whose work request is a signaled READ. */
		final java.util.Set<Integer> reads = new java.util.HashSet<>();

		final List<Integer> refused = new ArrayList<>();

		final ArrayBlockingQueue<Integer> free;

		volatile int refuseAt = -1;

		FakeSink(int buffers) {
			wrs = new SendWorkRequest[buffers];
			payload = new long[buffers];
			free = new ArrayBlockingQueue<>(buffers);
			for (int i = 0; i < buffers; i++) {
				wrs[i] = new SendWorkRequest();
				indexOf.put(wrs[i], i);
				free.add(i);
			}
		}

		@Override
		public SendWorkRequest prepare(int entry, boolean signalDue, boolean inFlight) {
			signaledInFlight.add(inFlight);
			int index = entry & SendSequencer.INDEX;
			SendWorkRequest wr = wrs[index];
			if (reads.contains(index)) {
				return wr.opcode(QueuePair.SendOpcode.RDMA_READ).flags(SendWorkRequest.Flag.SIGNALED);
			}
			wr.opcode(QueuePair.SendOpcode.SEND);
			return signalDue ? wr.flags(SendWorkRequest.Flag.SIGNALED) : wr.flags();
		}

		@Override
		public int post(ArrayList<SendWorkRequest> chain) {
			int n = refuseAt >= 0 ? Math.min(refuseAt, chain.size()) : chain.size();
			chains.add(chain.size());
			for (int k = 0; k < n; k++) {
				int index = indexOf.get(chain.get(k));
				posted.add(payload[index]);
				signaled.add(chain.get(k).hasFlag(SendWorkRequest.Flag.SIGNALED));
				free.offer(index);
			}
			return n;
		}

		@Override
		public void refused(int entry) {
			refused.add(entry);
			free.offer(entry & SendSequencer.INDEX);
		}

	}

	@Test
	void singleSendsAreEachTheirOwnPostAndABatchIsOnePost() throws InterruptedException {
		FakeSink sink = new FakeSink(16);
		ConnectionCounters counters = new ConnectionCounters();
		SendSequencer sequencer = new SendSequencer(17, 17, 1, counters, sink);
		for (int i = 0; i < 5; i++) {
			int index = sink.free.take();
			sink.payload[index] = i;
			sequencer.publish(sequencer.claim(1), index);
			sequencer.drive();
		}
		assertThat(sink.chains).containsExactly(1, 1, 1, 1, 1);
		int[] batch = new int[8];
		for (int i = 0; i < 8; i++) {
			batch[i] = sink.free.take();
			sink.payload[batch[i]] = 100 + i;
		}
		long first = sequencer.claim(8);
		for (int i = 0; i < 8; i++) {
			sequencer.publish(first + i, batch[i] | SendSequencer.OWNED);
		}
		sequencer.drive();
		assertThat(sink.chains).containsExactly(1, 1, 1, 1, 1, 8);
		assertThat(sink.posted).containsExactly(0L, 1L, 2L, 3L, 4L, 100L, 101L, 102L, 103L, 104L, 105L, 106L, 107L);
		for (int i = 0; i < 8; i++) {
			assertThat(sequencer.awaitOutcome(batch[i], first + i)).as("refused, place %d", i).isFalse();
		}
		assertThat(counters.sendsPosted()).isEqualTo(13);
		assertThat(counters.sendPosts()).isEqualTo(6);
	}

	@Test
	void aPlaceNotPublishedYetHoldsBackTheOnesBehindItUntilItIs() {
		FakeSink sink = new FakeSink(8);
		SendSequencer sequencer = new SendSequencer(9, 9, 1, new ConnectionCounters(), sink);
		long a = sequencer.claim(1); // claimed, not published yet
		long b = sequencer.claim(1);
		sink.payload[1] = 1;
		sequencer.publish(b, 1);
		sequencer.drive();
		assertThat(sink.posted).as("b waits for a").isEmpty();
		sink.payload[0] = 0;
		sequencer.publish(a, 0);
		sequencer.drive();
		assertThat(sink.posted).containsExactly(0L, 1L);
		assertThat(sink.chains).containsExactly(2);
	}

	@Test
	void signalingCountsAcrossChains() {
		FakeSink sink = new FakeSink(16);
		SendSequencer sequencer = new SendSequencer(17, 17, 4, new ConnectionCounters(), sink);
		postEach(sequencer, 0, 6);
		postChain(sequencer, 6, 6);
		assertThat(sink.signaled).containsExactly(false, false, false, true, false, false, false, true, false, false,
				false, true);
	}

	/**
	 * The sink learns whether a signaled SEND or WRITE is in flight (posted, its place
	 * not reclaimed by the poller yet), within a chain too; a signaled READ does not
	 * count (its buffer comes back through its reader), nor does a signaled place the
	 * provider refused.
	 */
	@Test
	void theSinkLearnsWhetherASignaledSendIsInFlight() {
		FakeSink sink = new FakeSink(16);
		SendSequencer sequencer = new SendSequencer(17, 17, 2, new ConnectionCounters(), sink);
		postEach(sequencer, 0, 3);
		// places 0 (unsignaled), 1 (signaled), 2: in flight from place 2 on
		assertThat(sink.signaled).containsExactly(false, true, false);
		assertThat(sink.signaledInFlight).containsExactly(false, false, true);
		sequencer.reclaimed(1);
		postEach(sequencer, 3, 1);
		assertThat(sink.signaledInFlight).as("place 1 not reclaimed yet").endsWith(true);
		sequencer.reclaimed(4);
		postChain(sequencer, 4, 3);
		// place 3 (signaled) reclaimed; places 4, 5 (signaled), 6 in one chain: place 6
		// sees place 5 in flight before the chain is posted
		assertThat(sink.signaled).endsWith(true, false, true, false);
		assertThat(sink.signaledInFlight).as("reclaimed, then signaled earlier in the same chain")
			.containsExactly(false, false, true, true, false, false, true);
		sequencer.reclaimed(7);
		sink.reads.add(7);
		postEach(sequencer, 7, 1);
		postEach(sequencer, 8, 1);
		assertThat(sink.signaled).as("place 7 a signaled READ").endsWith(true, false);
		assertThat(sink.signaledInFlight).as("a signaled READ does not count").endsWith(false, false);
		sink.refuseAt = 0;
		postEach(sequencer, 9, 1);
		sink.refuseAt = -1;
		postEach(sequencer, 10, 1);
		assertThat(sink.signaledInFlight).as("a refused signaled place does not count").endsWith(false);
	}

	@Test
	void aChainRefusedAtOneElementReportsExactlyItAndTheOnesAfterIt() {
		FakeSink sink = new FakeSink(16);
		ConnectionCounters counters = new ConnectionCounters();
		SendSequencer sequencer = new SendSequencer(17, 17, 1, counters, sink);
		sink.refuseAt = 5;
		long first = sequencer.claim(12);
		for (int i = 0; i < 12; i++) {
			// places 0-5 of other threads' sends, 6-11 a batch
			sequencer.publish(first + i, i < 6 ? i : (i | SendSequencer.OWNED));
		}
		sequencer.drive();
		assertThat(sink.chains).containsExactly(12);
		assertThat(counters.sendPosts()).isEqualTo(1);
		assertThat(counters.sendsPosted()).isEqualTo(5);
		assertThat(sink.refused).as("the sink counts the refused places that are not a batch's").containsExactly(5);
		for (int i = 6; i < 12; i++) {
			assertThat(sequencer.awaitOutcome(i, first + i)).as("the batch's place %d refused", i).isTrue();
		}
		for (int i = 0; i < 12; i++) {
			assertThat((sequencer.entry(first + i) & SendSequencer.REFUSED) != 0).as("place %d marked refused", i)
				.isEqualTo(i >= 5);
		}
		sink.refuseAt = -1;
		sequencer.publish(sequencer.claim(1), 5);
		sequencer.drive();
		assertThat(counters.sendsPosted()).as("posting goes on after a refusal").isEqualTo(6);
	}

	@Test
	void sendsOfSeveralThreadsArePostedOnceEachInEachThreadsOrder() throws Exception {
		int threads = 4;
		int perThread = 20_000;
		FakeSink sink = new FakeSink(32);
		ConnectionCounters counters = new ConnectionCounters();
		SendSequencer sequencer = new SendSequencer(33, 33, 1, counters, sink);
		CountDownLatch start = new CountDownLatch(1);
		List<Thread> senders = new ArrayList<>();
		for (int t = 0; t < threads; t++) {
			long base = (long) t << 32;
			Thread sender = new Thread(() -> {
				try {
					start.await();
					for (int i = 0; i < perThread; i++) {
						int index = sink.free.take();
						sink.payload[index] = base | i;
						sequencer.publish(sequencer.claim(1), index);
						sequencer.drive();
					}
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			});
			sender.start();
			senders.add(sender);
		}
		start.countDown();
		for (Thread sender : senders) {
			sender.join();
		}
		assertThat(sink.posted).hasSize(threads * perThread);
		int[] nextOf = new int[threads];
		for (long p : sink.posted) {
			int t = (int) (p >>> 32);
			assertThat((int) p).as("thread %d's next message", t).isEqualTo(nextOf[t]);
			nextOf[t]++;
		}
		assertThat(nextOf).containsOnly(perThread);
		assertThat(counters.sendsPosted()).isEqualTo(threads * perThread);
		assertThat(counters.sendPosts()).isEqualTo(sink.chains.size()).isLessThanOrEqualTo(threads * perThread);
		System.out.println("SEND-SEQUENCER " + threads * perThread + " sends of " + threads + " threads in "
				+ counters.sendPosts() + " posts");
	}

	/** Posts buffers {@code from..from+count) one by one, each its own claim. */
	private static void postEach(SendSequencer sequencer, int from, int count) {
		for (int i = from; i < from + count; i++) {
			sequencer.publish(sequencer.claim(1), i);
			sequencer.drive();
		}
	}

	/** Posts buffers {@code from..from+count) as one batch: one claim, one drive. */
	private static void postChain(SendSequencer sequencer, int from, int count) {
		long first = sequencer.claim(count);
		for (int i = 0; i < count; i++) {
			sequencer.publish(first + i, from + i);
		}
		sequencer.drive();
	}

}
