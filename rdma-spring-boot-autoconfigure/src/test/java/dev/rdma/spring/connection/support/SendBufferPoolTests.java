package dev.rdma.spring.connection.support;

import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The send buffers of a connection: each handed out once until given back; a sender waits
 * only when all are in flight, up to its timeout; closing wakes it.
 */
class SendBufferPoolTests {

	@Test
	void everyBufferIsHandedOutOnceUntilReleased() {
		SendBufferPool pool = new SendBufferPool(8);
		Set<Integer> taken = new HashSet<>();
		for (int i = 0; i < 8; i++) {
			assertThat(taken.add(pool.tryAcquire())).isTrue();
		}
		assertThat(taken).containsExactlyInAnyOrder(0, 1, 2, 3, 4, 5, 6, 7);
		assertThat(pool.tryAcquire()).isEqualTo(-1);
		assertThat(pool.inFlight()).isEqualTo(8);
		pool.release(5);
		assertThat(pool.tryAcquire()).isEqualTo(5);
	}

	/** A sender on another thread waiting up to 30 s for a buffer of {@code pool}. */
	private static CompletableFuture<Integer> acquireOnAnotherThread(SendBufferPool pool) {
		// a thread of its own: the common pool may have one thread only (two cores)
		return CompletableFuture.supplyAsync(() -> {
			try {
				return pool.acquire(TimeUnit.SECONDS.toNanos(30));
			}
			catch (InterruptedException ex) {
				throw new IllegalStateException(ex);
			}
		}, (task) -> Thread.ofPlatform().daemon().start(task));
	}

	@Test
	void aSenderWaitsForAReleaseUpToItsTimeout() throws Exception {
		SendBufferPool pool = new SendBufferPool(1);
		int only = pool.tryAcquire();
		long start = System.nanoTime();
		assertThat(pool.acquire(SendBufferPool.nanos(Duration.ofMillis(50)))).isEqualTo(-1);
		assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(50));
		CompletableFuture<Integer> waiting = acquireOnAnotherThread(pool);
		Thread.sleep(20);
		pool.release(only);
		assertThat(waiting.get(30, TimeUnit.SECONDS)).isEqualTo(only);
	}

	/**
	 * A completion's buffers go back together: each waiting sender, up to one per buffer,
	 * gets one; a sender beyond that waits on.
	 */
	@Test
	void aBatchReleaseWakesAsManyWaitingSendersAsItGivesBuffers() throws Exception {
		SendBufferPool pool = new SendBufferPool(3);
		int[] taken = { pool.tryAcquire(), pool.tryAcquire(), pool.tryAcquire() };
		java.util.List<CompletableFuture<Integer>> waiting = new java.util.ArrayList<>();
		for (int i = 0; i < 3; i++) {
			waiting.add(acquireOnAnotherThread(pool));
		}
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		while (pool.waiting() < 3 && System.nanoTime() < deadline) {
			Thread.sleep(5);
		}
		assertThat(pool.waiting()).as("three senders wait").isEqualTo(3);
		pool.release(taken, 2);
		CompletableFuture.anyOf(waiting.get(0), waiting.get(1), waiting.get(2)).get(30, TimeUnit.SECONDS);
		while (waiting.stream().filter(CompletableFuture::isDone).count() < 2 && System.nanoTime() < deadline) {
			Thread.sleep(5);
		}
		Thread.sleep(50);
		assertThat(waiting.stream().filter(CompletableFuture::isDone).map(CompletableFuture::join))
			.as("two buffers, two senders served")
			.containsExactlyInAnyOrder(taken[0], taken[1]);
		assertThat(pool.waiting()).isEqualTo(1);
		pool.release(new int[] { taken[2] }, 1);
		for (CompletableFuture<Integer> w : waiting) {
			w.get(30, TimeUnit.SECONDS);
		}
		assertThat(pool.available()).isZero();
	}

	@Test
	void closingWakesAWaitingSenderAndRefusesLaterOnes() throws Exception {
		SendBufferPool pool = new SendBufferPool(1);
		pool.tryAcquire();
		CompletableFuture<Integer> waiting = acquireOnAnotherThread(pool);
		Thread.sleep(20);
		pool.close();
		assertThat(waiting.get(5, TimeUnit.SECONDS)).isEqualTo(-1);
		pool.release(0);
		assertThat(pool.tryAcquire()).isEqualTo(-1);
	}

	/**
	 * A stream keeps its send queue full: its sender waits for a buffer before nearly
	 * every send. Those waits allocate nothing (a Condition's awaitNanos allocated a node
	 * per wait: 28 bytes per 64 KiB message in the xstream benchmark).
	 */
	@Test
	void aWaitingSenderAllocatesNothing() throws Exception {
		SendBufferPool pool = new SendBufferPool(1);
		com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory
			.getThreadMXBean();
		int rounds = 5_000;
		java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
		// the poller's part: gives the buffer back only once the sender waits for it
		Thread releaser = Thread.ofPlatform().daemon().start(() -> {
			while (!stop.get()) {
				synchronized (pool) { // the pool's own monitor: the two reads and the
										// release at once
					if (pool.waiting() > 0 && pool.available() == 0) {
						pool.release(0);
					}
				}
				Thread.onSpinWait();
			}
		});
		try {
			long[] allocated = new long[2];
			for (int pass = 0; pass < 2; pass++) { // the first warms up
				long before = threads.getCurrentThreadAllocatedBytes();
				for (int i = 0; i < rounds; i++) {
					if (pool.tryAcquire() != 0) { // (no assertion inside the loop:
													// AssertJ allocates)
						throw new AssertionError("the free buffer was not 0 in round " + i);
					}
					int again = pool.acquire(TimeUnit.SECONDS.toNanos(30)); // waits
					if (again != 0) {
						throw new AssertionError("no buffer within 30 s in round " + i);
					}
					pool.release(again);
				}
				allocated[pass] = threads.getCurrentThreadAllocatedBytes() - before;
			}
			assertThat(allocated[1]).as("bytes allocated by %d waits for a buffer", rounds).isZero();
		}
		finally {
			stop.set(true);
			releaser.join();
		}
	}

	/**
	 * More senders than buffers, each taking and giving back a buffer in a loop: every
	 * one gets its turns (none left parked with a buffer free), no buffer is handed out
	 * twice, and the pool ends full with nobody waiting; some waits time out and leave
	 * the ring of waiters on the way.
	 */
	@Test
	void manySendersShareFewBuffers() throws Exception {
		SendBufferPool pool = new SendBufferPool(2);
		java.util.concurrent.atomic.AtomicIntegerArray holders = new java.util.concurrent.atomic.AtomicIntegerArray(2);
		java.util.concurrent.atomic.AtomicInteger timeouts = new java.util.concurrent.atomic.AtomicInteger();
		java.util.List<CompletableFuture<Integer>> senders = new java.util.ArrayList<>();
		java.util.concurrent.ExecutorService threads = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor();
		for (int s = 0; s < 8; s++) {
			senders.add(CompletableFuture.supplyAsync(() -> {
				int done = 0;
				while (done < 2_000) {
					int index;
					try {
						index = pool.acquire(TimeUnit.MICROSECONDS.toNanos(done % 7 == 0 ? 50 : 30_000_000));
					}
					catch (InterruptedException ex) {
						throw new IllegalStateException(ex);
					}
					if (index < 0) {
						timeouts.incrementAndGet();
						continue;
					}
					if (holders.getAndIncrement(index) != 0) {
						throw new IllegalStateException("buffer " + index + " handed out twice");
					}
					Thread.onSpinWait();
					holders.decrementAndGet(index);
					pool.release(index);
					done++;
				}
				return done;
			}, threads));
		}
		try {
			for (CompletableFuture<Integer> sender : senders) {
				assertThat(sender.get(60, TimeUnit.SECONDS)).isEqualTo(2_000);
			}
		}
		finally {
			threads.shutdownNow();
		}
		assertThat(pool.available()).isEqualTo(2);
		assertThat(pool.waiting()).isZero();
	}

}
