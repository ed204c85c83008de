package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Native;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link BlockingRead} without a device, on a blocking eventfd (a read of an eventfd
 * whose counter is 0 blocks, as a completion channel's read does without an event): an
 * interrupt and a deadline end the read with EINTR, a signal sent before the read began
 * is repeated until the read ends, and data ends it without a signal.
 */
class BlockingReadTest {

	private final Arena arena = Arena.ofShared();

	private final BlockingRead read = new BlockingRead("a test eventfd");

	private int fd;

	@BeforeEach
	void open() {
		BlockingRead.checkSignalHandler();
		fd = Libc.eventfd();
		assertThat(fd).isGreaterThanOrEqualTo(0);
		assertThat(Libc.setBlocking(fd)).isZero();
		assertThat(Libc.isNonBlocking(fd)).isFalse();
		read.register();
	}

	@AfterEach
	void close() {
		read.unregister();
		Libc.close(fd);
		arena.close();
	}

	/** begin, check, read, end: what CompletionChannel's blocking getEvent does. */
	private long readOnce(long timeoutNanos, CountDownLatch begun, CountDownLatch go) throws InterruptedException {
		MemorySegment buf = arena.allocate(JAVA_LONG);
		MemorySegment capture = Native.allocateCapture(arena);
		read.begin(System.nanoTime() + timeoutNanos);
		try {
			begun.countDown();
			go.await();
			// deliberately no check of interrupted(): the read must end anyway
			return Libc.readOnce(fd, buf, 8, capture);
		}
		finally {
			read.end();
		}
	}

	private CompletableFuture<Long> reader(long timeoutNanos, CountDownLatch begun, CountDownLatch go) {
		CompletableFuture<Long> f = new CompletableFuture<>();
		Thread.ofPlatform().name("blocking-reader").start(() -> {
			try {
				f.complete(readOnce(timeoutNanos, begun, go));
			}
			catch (Throwable t) {
				f.completeExceptionally(t);
			}
		});
		return f;
	}

	@Test
	void theJdkHandlerIsInstalledWithoutRestart() {
		long[] action = Libc.sigactionOf(Libc.JDK_INTERRUPT_SIGNAL, new int[1]);
		assertThat(action).isNotNull();
		assertThat(action[0]).isNotIn(Libc.SIG_DFL, Libc.SIG_IGN);
		assertThat(action[1] & Libc.SA_RESTART).isZero();
	}

	@Test
	void anInterruptEndsTheReadWithEintr() throws Exception {
		for (int i = 0; i < 50; i++) {
			CountDownLatch begun = new CountDownLatch(1);
			CompletableFuture<Long> f = reader(TimeUnit.SECONDS.toNanos(60), begun, new CountDownLatch(0));
			assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
			Thread.sleep(i % 5); // before and after the read has begun
			long start = System.nanoTime();
			read.interrupt();
			assertThat(f.get(10, TimeUnit.SECONDS)).as("round %d", i).isEqualTo(-Errno.EINTR);
			assertThat(System.nanoTime() - start).isLessThan(TimeUnit.SECONDS.toNanos(5));
			assertThat(read.reading()).isFalse();
		}
	}

	@Test
	void aSignalSentBeforeTheReadBeganIsRepeated() throws Exception {
		CountDownLatch begun = new CountDownLatch(1);
		CountDownLatch go = new CountDownLatch(1);
		CompletableFuture<Long> f = reader(TimeUnit.SECONDS.toNanos(60), begun, go);
		assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
		read.interrupt(); // lands while the reader waits for go, not in its read
		assertThat(read.interrupted()).isTrue();
		Thread.sleep(20);
		go.countDown();
		assertThat(f.get(10, TimeUnit.SECONDS)).isEqualTo(-Errno.EINTR);
	}

	@Test
	void theReadsOfOneVirtualThreadAreEndedOnWhicheverCarrier() throws Exception {
		// One virtual thread reads 20 times, sleeping (unmounted) in between, so its
		// reads may run on different carriers (the test prints which ran them; the
		// scheduler often keeps one): begin() names the carrier of each read, where a
		// pthread_t kept from an earlier read would signal the wrong thread.
		int rounds = 20;
		java.util.concurrent.BlockingQueue<Long> results = new java.util.concurrent.LinkedBlockingQueue<>();
		java.util.Set<String> carriers = java.util.concurrent.ConcurrentHashMap.newKeySet();
		Thread v = Thread.ofVirtual().start(() -> {
			try {
				for (int i = 0; i < rounds; i++) {
					Thread.sleep(1 + i % 3);
					String name = Thread.currentThread().toString();
					carriers.add(name.substring(name.indexOf('@') + 1));
					results.add(readOnce(TimeUnit.SECONDS.toNanos(60), new CountDownLatch(0), new CountDownLatch(0)));
				}
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
			}
		});
		for (int i = 0; i < rounds; i++) {
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
			while (!read.reading() && System.nanoTime() < deadline) {
				Thread.onSpinWait();
			}
			Thread.sleep(i % 3);
			read.interrupt();
			assertThat(results.poll(10, TimeUnit.SECONDS)).as("read %d", i).isEqualTo(-Errno.EINTR);
		}
		v.join(TimeUnit.SECONDS.toMillis(10));
		assertThat(v.isAlive()).isFalse();
		System.out.println("# 20 blocking reads of one virtual thread ran on carrier(s) " + carriers);
	}

	@Test
	void theReadsOfTwoPlatformThreadsTakingTurnsAreEachEnded() throws Exception {
		// begin() keeps a platform thread's pthread_t from one read to its next: when
		// another thread reads in between, the signal must go to that one (a kept
		// pthread_t of the other thread would leave this read blocked, and the test
		// would time out at its get)
		ExecutorService[] threads = { Executors.newSingleThreadExecutor(), Executors.newSingleThreadExecutor() };
		try {
			for (int i = 0; i < 20; i++) {
				CountDownLatch begun = new CountDownLatch(1);
				Future<Long> f = threads[i % 3 == 0 ? 0 : 1]
					.submit(() -> readOnce(TimeUnit.SECONDS.toNanos(60), begun, new CountDownLatch(0)));
				assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
				Thread.sleep(i % 3);
				read.interrupt();
				assertThat(f.get(10, TimeUnit.SECONDS)).as("read %d", i).isEqualTo(-Errno.EINTR);
			}
		}
		finally {
			for (ExecutorService t : threads) {
				t.shutdownNow();
			}
		}
	}

	@Test
	void theDeadlineEndsTheRead() throws Exception {
		long start = System.nanoTime();
		CompletableFuture<Long> f = reader(TimeUnit.MILLISECONDS.toNanos(200), new CountDownLatch(1),
				new CountDownLatch(0));
		assertThat(f.get(10, TimeUnit.SECONDS)).isEqualTo(-Errno.EINTR);
		long took = System.nanoTime() - start;
		System.out.printf("# blocking read with a 200 ms deadline ended after %.1f ms%n", took / 1e6);
		assertThat(took).isBetween(TimeUnit.MILLISECONDS.toNanos(195), TimeUnit.SECONDS.toNanos(3));
	}

	@Test
	void dataEndsTheReadWithoutASignal() throws Exception {
		CountDownLatch begun = new CountDownLatch(1);
		CompletableFuture<Long> f = reader(TimeUnit.SECONDS.toNanos(60), begun, new CountDownLatch(0));
		assertThat(begun.await(10, TimeUnit.SECONDS)).isTrue();
		Thread.sleep(20);
		MemorySegment one = arena.allocate(JAVA_LONG);
		one.set(JAVA_LONG, 0, 1L);
		assertThat(Libc.write8(fd, one, Native.allocateCapture(arena))).isEqualTo(8);
		assertThat(f.get(10, TimeUnit.SECONDS)).isEqualTo(8);
		assertThat(read.interrupted()).isFalse();
	}

}
