package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A {@link CompletionChannel.WaitMode#BLOCKING_READ} channel on the device: its fd stays
 * blocking, and the thread asleep in {@code ibv_get_cq_event}'s read is ended by its
 * timeout, a waker, the channel's close and a CQ's close (which acks an event the reader
 * got meanwhile), each within a bound; a second thread getting events meanwhile is
 * refused; a read that fails names the verb and its errno at once. Events themselves:
 * {@code BindingsDeviceTest}, in both modes.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BlockingReadDeviceTest {

	private static final Duration BOUND = Duration.ofSeconds(5);

	/**
	 * Threads of their own: the common pool has one thread on a 2-CPU guest, which the
	 * blocked reader occupies.
	 */
	private static final ExecutorService THREADS = Executors.newCachedThreadPool();

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	@AfterAll
	static void stopThreads() {
		THREADS.shutdownNow();
	}

	/** Waits until {@code channel}'s blocking read is under way. */
	private static void awaitReading(CompletionChannel channel) {
		DeviceTestSupport.await(Duration.ofSeconds(20), () -> channel.blockingReadUnderWay(), "a blocking read");
	}

	private static CompletableFuture<CompletionQueue> getEventAsync(CompletionChannel channel, Duration timeout,
			Waker waker) {
		return CompletableFuture.supplyAsync(() -> channel.getEvent(timeout, waker), THREADS);
	}

	@Test
	void theFdStaysBlockingAndTheTimeoutEndsTheRead() throws Exception {
		try (CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ);
				CompletionQueue cq = ctx().createCompletionQueue(16, channel, 0)) {
			assertThat(channel.waitMode()).isEqualTo(CompletionChannel.WaitMode.BLOCKING_READ);
			try (CompletionChannel poll = ctx().createCompletionChannel()) {
				assertThat(poll.waitMode()).isEqualTo(CompletionChannel.WaitMode.POLL);
				assertThat(dev.rdma.verbs.ffm.Libc.isNonBlocking(poll.fd())).isTrue();
			}
			assertThat(dev.rdma.verbs.ffm.Libc.isNonBlocking(channel.fd())).isFalse();
			cq.requestNotify(false);
			for (int i = 0; i < 5; i++) {
				long start = System.nanoTime();
				assertThat(channel.getEvent(Duration.ofMillis(150), null)).isNull();
				long took = System.nanoTime() - start;
				System.out.printf("# blocking getEvent(150 ms) without an event returned null after %.1f ms%n",
						took / 1e6);
				assertThat(Duration.ofNanos(took)).isBetween(Duration.ofMillis(149), BOUND);
			}
			assertThat(channel.getEvent()).isNull();
			assertThat(channel.getEvent(Duration.ZERO, null)).isNull();
		}
	}

	@Test
	void aWakerEndsTheReadAndTheNextEventIsStillGot() throws Exception {
		try (CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ);
				CompletionQueue cq = ctx().createCompletionQueue(64, channel, 0);
				Loopback lb = new Loopback(ctx(), cq, cq, 8, 64);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16);
				Waker waker = new Waker()) {
			cq.requestNotify(false);
			for (int round = 0; round < 20; round++) {
				CompletableFuture<CompletionQueue> f = getEventAsync(channel, Duration.ofSeconds(60), waker);
				awaitReading(channel);
				long woken = System.nanoTime();
				waker.wake();
				assertThat(f.get(BOUND.toSeconds(), TimeUnit.SECONDS)).as("round %d", round).isNull();
				assertThat(Duration.ofNanos(System.nanoTime() - woken)).isLessThan(BOUND);
			}
			lb.postRecv(1, 0);
			lb.postSend(2, 0, 16, null);
			assertThat(channel.getEvent(Duration.ofSeconds(20), waker)).isSameAs(cq);
			assertThat(cq.poll(buffer) + cq.poll(buffer)).isPositive();
			assertThat(cq.ackEvents()).isEqualTo(1);
		}
	}

	@Test
	void aSecondThreadGettingEventsMeanwhileIsRefused() throws Exception {
		try (CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ);
				Waker waker = new Waker()) {
			CompletableFuture<CompletionQueue> f = getEventAsync(channel, Duration.ofSeconds(60), waker);
			awaitReading(channel);
			assertThatThrownBy(() -> channel.getEvent(Duration.ofSeconds(1), null))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("one thread getting events at a time");
			assertThatThrownBy(channel::getEvent).isInstanceOf(IllegalStateException.class);
			assertThat(channel.await(Duration.ofMillis(10), null)).isEqualTo(CompletionChannel.WaitResult.TIMEOUT);
			waker.wake();
			assertThat(f.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isNull();
		}
	}

	/**
	 * The first read of a wait goes without errno capture; a failed one is repeated with
	 * it, so an error is still named at once (not retried until the timeout). The
	 * channel's fd is replaced with a pipe's write end, on which read(2) fails with
	 * EBADF.
	 */
	@Test
	void aReadThatFailsNamesTheVerbAndTheErrnoAtOnce() throws Throwable {
		Linker linker = Linker.nativeLinker();
		MethodHandle pipe = linker.downcallHandle(linker.defaultLookup().findOrThrow("pipe"),
				FunctionDescriptor.of(JAVA_INT, ADDRESS));
		MethodHandle dup2 = linker.downcallHandle(linker.defaultLookup().findOrThrow("dup2"),
				FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
		MethodHandle close = linker.downcallHandle(linker.defaultLookup().findOrThrow("close"),
				FunctionDescriptor.of(JAVA_INT, JAVA_INT));
		try (Arena arena = Arena.ofConfined();
				CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ)) {
			MemorySegment fds = arena.allocate(JAVA_INT, 2);
			assertThat((int) pipe.invokeExact(fds)).isZero();
			int readEnd = fds.getAtIndex(JAVA_INT, 0);
			int writeEnd = fds.getAtIndex(JAVA_INT, 1);
			try {
				assertThat((int) dup2.invokeExact(writeEnd, channel.fd())).isEqualTo(channel.fd());
				for (int round = 0; round < 3; round++) {
					long start = System.nanoTime();
					assertThatThrownBy(() -> channel.getEvent(Duration.ofSeconds(60), null)).as("round %d", round)
						.isInstanceOf(VerbsException.class)
						.hasMessageContaining("ibv_get_cq_event")
						.hasMessageContaining("EBADF (9): Bad file descriptor");
					assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(BOUND);
				}
			}
			finally {
				int r = (int) close.invokeExact(readEnd);
				int w = (int) close.invokeExact(writeEnd);
				assertThat(r).isZero();
				assertThat(w).isZero();
			}
		}
	}

	@Test
	void closingTheChannelEndsTheRead() throws Exception {
		for (int round = 0; round < 10; round++) {
			CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ);
			try (Waker waker = new Waker()) {
				CompletableFuture<CompletionQueue> f = getEventAsync(channel, Duration.ofSeconds(60),
						round % 2 == 0 ? waker : null);
				awaitReading(channel);
				long start = System.nanoTime();
				CompletableFuture.runAsync(channel::close, THREADS).get(BOUND.toSeconds(), TimeUnit.SECONDS);
				assertThat(f.get(BOUND.toSeconds(), TimeUnit.SECONDS)).as("round %d", round).isNull();
				assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(BOUND);
				assertThat(channel.isClosed()).isTrue();
			}
		}
	}

	@Test
	void closingACqDuringTheReadAcksWhatWasGotAndTheReadGoesOn() throws Exception {
		try (CompletionChannel channel = ctx().createCompletionChannel(CompletionChannel.WaitMode.BLOCKING_READ);
				CompletionQueue kept = ctx().createCompletionQueue(16, channel, 0);
				Waker waker = new Waker()) {
			kept.requestNotify(false);
			for (int round = 0; round < 10; round++) {
				CompletionQueue cq = ctx().createCompletionQueue(64, channel, 0);
				Loopback lb = new Loopback(ctx(), cq, cq, 8, 64);
				cq.requestNotify(false);
				CompletableFuture<CompletionQueue> f = getEventAsync(channel, Duration.ofSeconds(60), waker);
				awaitReading(channel);
				boolean withEvent = round % 2 == 0;
				if (withEvent) { // the reader gets it: the close must ack it
					lb.postRecv(1, 0);
					lb.postSend(2, 0, 16, null);
					assertThat(f.get(20, TimeUnit.SECONDS)).isSameAs(cq);
					f = getEventAsync(channel, Duration.ofSeconds(60), waker);
					awaitReading(channel);
				}
				lb.close();
				long start = System.nanoTime();
				CompletableFuture.runAsync(cq::close, THREADS).get(BOUND.toSeconds(), TimeUnit.SECONDS);
				assertThat(Duration.ofNanos(System.nanoTime() - start)).as("CQ close, round %d", round)
					.isLessThan(BOUND);
				assertThat(cq.eventsAcked()).isEqualTo(cq.eventsGot()).isEqualTo(withEvent ? 1 : 0);
				// the read goes on, then a waker ends it
				awaitReading(channel);
				assertThat(f).isNotDone();
				waker.wake();
				assertThat(f.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isNull();
			}
			assertThat(channel.completionQueues()).containsExactly(kept);
		}
	}

}
