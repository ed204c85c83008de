package dev.rdma.verbs;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link Epoll} without a device: its waker ends a wait, a wake-up given before the wait
 * is not lost, a timeout returns nothing, close is idempotent. (With completion channels
 * it is exercised by the poller-group device tests of the starter.)
 */
class EpollTest {

	@Test
	void aWakeUpEndsTheWaitAndIsConsumed() throws Exception {
		try (Waker waker = new Waker(); Epoll epoll = new Epoll(waker, 4)) {
			CompletableFuture<Integer> wait = CompletableFuture
				.supplyAsync(() -> epoll.await(TimeUnit.SECONDS.toNanos(30)));
			Thread.sleep(50);
			waker.wake();
			assertThat(wait.get(10, TimeUnit.SECONDS)).isZero();
			assertThat(epoll.woken()).isTrue();
			// consumed: the next wait times out
			assertThat(epoll.await(TimeUnit.MILLISECONDS.toNanos(20))).isZero();
			assertThat(epoll.woken()).isFalse();
		}
	}

	@Test
	void aWakeUpBeforeTheWaitIsNotLost() {
		try (Waker waker = new Waker(); Epoll epoll = new Epoll(waker, 1)) {
			waker.wake();
			long start = System.nanoTime();
			assertThat(epoll.await(TimeUnit.SECONDS.toNanos(30))).isZero();
			assertThat(epoll.woken()).isTrue();
			assertThat(System.nanoTime() - start).isLessThan(TimeUnit.SECONDS.toNanos(10));
		}
	}

	@Test
	void closeIsIdempotentAndAClosedInstanceRefusesToWait() {
		try (Waker waker = new Waker()) {
			Epoll epoll = new Epoll(waker, 1);
			epoll.close();
			epoll.close();
			assertThatThrownBy(() -> epoll.await(0)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("closed");
			assertThatThrownBy(() -> new Epoll(waker, 0)).isInstanceOf(IllegalArgumentException.class);
		}
	}

	@Test
	void aCloseOnAnotherThreadEndsTheWaitBeforeItFreesTheMemory() throws Exception {
		try (Waker waker = new Waker()) {
			Epoll epoll = new Epoll(waker, 4);
			long[] awaitReturned = new long[1];
			CompletableFuture<Integer> wait = CompletableFuture.supplyAsync(() -> {
				int n = epoll.await(TimeUnit.SECONDS.toNanos(30));
				awaitReturned[0] = System.nanoTime();
				return n;
			});
			Thread.sleep(200);
			epoll.close();
			long closeReturned = System.nanoTime();
			// the kernel writes ready events into the instance's memory: the close
			// must not free it while epoll_wait runs (before, the wait went on after
			// the close)
			assertThat(wait.get(5, TimeUnit.SECONDS)).isZero();
			assertThat(awaitReturned[0]).as("the wait ended before the close returned")
				.isLessThanOrEqualTo(closeReturned);
			assertThatThrownBy(() -> epoll.await(0)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("closed");
		}
	}

	@Test
	void aConstructorRefusingAClosedWakerLeavesNoFdOpen() throws Exception {
		Waker waker = new Waker();
		waker.close();
		long before = openFds();
		for (int i = 0; i < 5; i++) {
			assertThatThrownBy(() -> new Epoll(waker, 4)).isInstanceOf(IllegalStateException.class);
		}
		assertThat(openFds()).as("fds after 5 refused constructors").isEqualTo(before);
	}

	private static long openFds() throws java.io.IOException {
		try (java.util.stream.Stream<java.nio.file.Path> fds = java.nio.file.Files
			.list(java.nio.file.Path.of("/proc/self/fd"))) {
			return fds.count();
		}
	}

}
