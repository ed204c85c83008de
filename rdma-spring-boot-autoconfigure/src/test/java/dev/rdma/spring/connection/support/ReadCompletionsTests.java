package dev.rdma.spring.connection.support;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The hand-over of RDMA READ completions to their readers: a completion before or during
 * the wait wakes the reader with its status; a reader that times out (or is interrupted)
 * leaves the buffer to the completion, which reports it for release exactly once; a
 * completion of a slot never races a later READ of the same slot into a wrong status.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReadCompletionsTests {

	private static final long LONG = TimeUnit.SECONDS.toNanos(30);

	@Test
	void aCompletionBeforeTheWaitIsSeenAtOnce() {
		ReadCompletions reads = new ReadCompletions(4);
		reads.begin(2);
		assertThat(reads.complete(2, 0)).isFalse();
		long start = System.nanoTime();
		assertThat(reads.await(2, LONG)).isZero();
		assertThat(System.nanoTime() - start).isLessThan(TimeUnit.SECONDS.toNanos(5));
	}

	@Test
	void aCompletionDuringTheWaitWakesTheReaderWithItsStatus() throws Exception {
		ReadCompletions reads = new ReadCompletions(4);
		CountDownLatch begun = new CountDownLatch(1);
		CompletableFuture<Integer> reader = CompletableFuture.supplyAsync(() -> {
			reads.begin(1);
			begun.countDown();
			return reads.await(1, LONG);
		});
		assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
		Thread.sleep(50); // most likely parked by now
		assertThat(reads.complete(1, 5)).as("the reader waits: it frees the buffer").isFalse();
		assertThat(reader.get(10, TimeUnit.SECONDS)).as("the work completion status").isEqualTo(5);
	}

	@Test
	void aReaderWaitingForTheLastOfSeveralReadsWaitsForThatOneAndLeavesEveryStatus() throws Exception {
		ReadCompletions reads = new ReadCompletions(4);
		reads.begin(0);
		reads.begin(1);
		CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> reads.awaitDone(1, System.nanoTime() + LONG));
		Thread.sleep(50);
		assertThat(reads.complete(0, 0)).isFalse();
		Thread.sleep(50);
		assertThat(waiter).as("still waiting for READ 1").isNotDone();
		assertThat(reads.complete(1, 7)).isFalse();
		waiter.get(10, TimeUnit.SECONDS);
		assertThat(reads.await(0, 0)).as("READ 0's status, left for the reap").isZero();
		assertThat(reads.await(1, 0)).isEqualTo(7);
	}

	@Test
	void aReaderThatTimesOutLeavesTheBufferToTheCompletion() {
		ReadCompletions reads = new ReadCompletions(1);
		reads.begin(0);
		long start = System.nanoTime();
		assertThat(reads.await(0, TimeUnit.MILLISECONDS.toNanos(50))).isEqualTo(ReadCompletions.ABANDONED);
		assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(50));
		assertThat(reads.complete(0, 0)).as("the late completion frees the buffer").isTrue();
		// the slot is usable again
		reads.begin(0);
		assertThat(reads.complete(0, 0)).isFalse();
		assertThat(reads.await(0, LONG)).isZero();
	}

	@Test
	void anInterruptedReaderGivesUpAndKeepsItsInterruptStatus() {
		ReadCompletions reads = new ReadCompletions(1);
		reads.begin(0);
		Thread.currentThread().interrupt();
		try {
			assertThat(reads.await(0, LONG)).isEqualTo(ReadCompletions.ABANDONED);
			assertThat(Thread.currentThread().isInterrupted()).isTrue();
		}
		finally {
			Thread.interrupted();
		}
		assertThat(reads.complete(0, 0)).isTrue();
	}

	@Test
	void underARaceEachReadEndsOnceEitherWithItsStatusOrAbandoned() throws Exception {
		ReadCompletions reads = new ReadCompletions(1);
		AtomicInteger freedByCompletion = new AtomicInteger();
		AtomicInteger freedByReader = new AtomicInteger();
		int rounds = 5000;
		for (int i = 0; i < rounds; i++) {
			reads.begin(0);
			int status = i % 3;
			Thread poller = Thread.ofPlatform().start(() -> {
				if (reads.complete(0, status)) {
					freedByCompletion.incrementAndGet();
				}
			});
			// a timeout of 0..2 us races the completion
			int seen = reads.await(0, i % 3 * 1000);
			poller.join();
			if (seen != ReadCompletions.ABANDONED) {
				assertThat(seen).isEqualTo(status);
				freedByReader.incrementAndGet();
			}
		}
		assertThat(freedByCompletion.get() + freedByReader.get()).as("each buffer freed exactly once")
			.isEqualTo(rounds);
	}

}
