package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;
import static org.mockito.Mockito.withSettings;

/**
 * A container stopped and started again (a context's {@code stop()} then {@code start()}:
 * pause and resume) polls its queue again, on a dedicated poller and on a poller group;
 * and what a listener hands to {@link PollerThreads#closeWhenPollEnds} while its poller
 * keeps running (a connection it closes or restarts) is closed at the poller's next turn,
 * not when the poller ends.
 */
class ContainerRestartTests {

	/** A queue (stub) that delivers one completion per {@code pending} count. */
	private static CompletionQueue queue(AtomicInteger pending) {
		return queue(pending, new AtomicInteger());
	}

	/**
	 * A queue (stub) whose first {@code errors} polls throw an OutOfMemoryError, then
	 * delivers one completion per {@code pending} count.
	 */
	private static CompletionQueue queue(AtomicInteger pending, AtomicInteger errors) {
		CompletionQueue queue = PollerStubs.queue(null);
		WorkCompletion completion = mock(WorkCompletion.class, withSettings().stubOnly());
		when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
			if (errors.getAndUpdate(e -> Math.max(0, e - 1)) > 0) {
				throw new OutOfMemoryError("a poll that ran out of memory (test)");
			}
			if (pending.get() <= 0) {
				return 0;
			}
			pending.decrementAndGet();
			call.getArgument(1, CompletionHandler.class).onCompletion(completion);
			return 1;
		});
		return queue;
	}

	private static CompletionQueueListenerContainer container(CompletionQueue queue, boolean group) {
		PollerSettings settings = PollerSettings.DEFAULTS.withMode(PollingMode.BUSY);
		CompletionQueueListenerContainer container = new CompletionQueueListenerContainer("q", queue, settings,
				new CompletionEventRouter());
		if (group) {
			PollerGroupSettings groupSettings = PollerGroupSettings.DEFAULTS.withMode(PollingMode.BUSY);
			container.setPollerGroup(new PollerGroup("g", groupSettings, new CompletionEventRouter()));
		}
		return container;
	}

	private static void awaitCount(AtomicInteger count, int expected) throws InterruptedException {
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
		while (count.get() < expected && System.nanoTime() < deadline) {
			Thread.sleep(5);
		}
		assertThat(count).as("completions delivered").hasValue(expected);
	}

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void aStoppedContainerPollsAgainWhenStartedAgain(boolean group) throws Exception {
		AtomicInteger pending = new AtomicInteger();
		AtomicInteger delivered = new AtomicInteger();
		CompletionQueueListenerContainer container = container(queue(pending), group);
		container.setupListener("listener", completion -> delivered.incrementAndGet(), false);
		container.start();
		Thread first = container.thread();
		container.start();
		assertThat(container.thread()).as("a start while running does nothing").isSameAs(first);
		pending.set(1);
		awaitCount(delivered, 1);

		assertThat(container.stop(Duration.ofSeconds(10))).as("stopped").isTrue();
		assertThat(container.isRunning()).isFalse();
		pending.set(1);
		Thread.sleep(100);
		assertThat(delivered).as("nothing polled while stopped").hasValue(1);

		container.start();
		assertThat(container.isRunning()).as("running again after the second start").isTrue();
		assertThat(container.thread()).as("a new poller thread").isNotNull().isNotSameAs(first);
		awaitCount(delivered, 2);

		// and once more: every stop and start pair works, not only the first
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
		container.start();
		pending.set(1);
		awaitCount(delivered, 3);
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
		assertThat(container.isRunning()).isFalse();
	}

	/**
	 * A dedicated poller whose thread ended without a stop (an Error out of a poll, as an
	 * OutOfMemoryError): not running, and a start runs a new poller; before, the start
	 * did nothing, as for a running poller, and only a stop then a start polled again.
	 */
	@Test
	void aPollerWhoseThreadDiedPollsAgainWhenStarted() throws Exception {
		AtomicInteger pending = new AtomicInteger();
		AtomicInteger delivered = new AtomicInteger();
		AtomicInteger errors = new AtomicInteger(1);
		CompletionQueueListenerContainer container = container(queue(pending, errors), false);
		container.setupListener("listener", c -> delivered.incrementAndGet(), false);
		container.start();
		Thread first = container.thread();
		assertThat(first).isNotNull();
		first.join(Duration.ofSeconds(10));
		assertThat(first.isAlive()).as("the poller thread ended on the Error").isFalse();
		assertThat(container.isRunning()).isFalse();
		container.start();
		assertThat(container.thread()).as("a new poller thread").isNotNull().isNotSameAs(first);
		assertThat(container.isRunning()).isTrue();
		pending.set(1);
		awaitCount(delivered, 1);
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
	}

	/**
	 * The poller group is read by the stop: changing it while the poller runs is refused
	 * (before, a change left the queue polled by its group thread after the stop).
	 */
	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void thePollerGroupCannotChangeWhileThePollerRuns(boolean group) throws Exception {
		AtomicInteger pending = new AtomicInteger();
		CompletionQueueListenerContainer container = container(queue(pending), group);
		container.setupListener("listener", c -> {
		}, false);
		container.start();
		PollerGroup other = new PollerGroup("other", PollerGroupSettings.DEFAULTS.withMode(PollingMode.BUSY),
				new CompletionEventRouter());
		assertThatIllegalStateException().isThrownBy(() -> container.setPollerGroup(other))
			.withMessageContaining("queue 'q'")
			.withMessageContaining("is running");
		assertThatIllegalStateException().isThrownBy(() -> container.setPollerGroup(null));
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
		assertThat(container.isRunning()).isFalse();
		container.setPollerGroup(group ? null : other);
		container.start();
		assertThat(container.isRunning()).isTrue();
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
	}

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void aStartWhileTheStopWaitsForTheListenerIsRefused(boolean group) throws Exception {
		AtomicInteger pending = new AtomicInteger();
		CountDownLatch inListener = new CountDownLatch(1);
		CountDownLatch release = new CountDownLatch(1);
		AtomicInteger delivered = new AtomicInteger();
		CompletionQueueListenerContainer container = container(queue(pending), group);
		container.setupListener("listener", completion -> {
			delivered.incrementAndGet();
			inListener.countDown();
			try {
				release.await();
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}, false);
		container.start();
		pending.set(1);
		assertThat(inListener.await(10, TimeUnit.SECONDS)).isTrue();
		container.signalStop();
		assertThatIllegalStateException().isThrownBy(container::start)
			.withMessageContaining("queue 'q'")
			.withMessageContaining("still stopping");
		release.countDown();
		assertThat(container.awaitStop(System.nanoTime() + TimeUnit.SECONDS.toNanos(10))).isTrue();
		container.start();
		pending.set(1);
		awaitCount(delivered, 2);
		assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
	}

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void whatAListenerHandsOverIsClosedWhileThePollerRunsOn(boolean group) throws Exception {
		AtomicInteger pending = new AtomicInteger();
		CountDownLatch closed = new CountDownLatch(1);
		AtomicReference<@Nullable String> closedBy = new AtomicReference<>();
		AtomicReference<@Nullable Thread> poller = new AtomicReference<>();
		CompletionQueueListenerContainer container = container(queue(pending), group);
		container.setupListener("listener", completion -> {
			poller.set(Thread.currentThread());
			assertThat(PollerThreads.closeWhenPollEnds(() -> {
				closedBy.set(Thread.currentThread().getName());
				closed.countDown();
			})).isTrue();
		}, false);
		container.start();
		try {
			pending.set(1);
			assertThat(closed.await(5, TimeUnit.SECONDS))
				.as("the handed-over resource was closed while the poller runs")
				.isTrue();
			assertThat(container.isRunning()).isTrue();
			Thread thread = poller.get();
			assertThat(thread).isNotNull();
			assertThat(closedBy.get()).as("closed by the poller thread").isEqualTo(thread.getName());
		}
		finally {
			assertThat(container.stop(Duration.ofSeconds(10))).isTrue();
		}
	}

}
