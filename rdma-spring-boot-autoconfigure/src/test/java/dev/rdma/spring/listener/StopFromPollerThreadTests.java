package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
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
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;
import static org.mockito.Mockito.withSettings;

/**
 * A listener that stops its own container (what closing the application context from a
 * listener does): on a dedicated poller and on a poller group's thread, the stop knows it
 * runs on the poller, does not wait for itself (the shutdown timeout, 20 s here), and the
 * poller thread closes what was handed to {@link PollerThreads#closeWhenPollEnds} once
 * the listener has returned, then ends.
 */
class StopFromPollerThreadTests {

	/** A queue (stub) that delivers one completion to the first poll, then none. */
	private static CompletionQueue oneCompletion() {
		CompletionQueue queue = PollerStubs.queue(null);
		WorkCompletion completion = mock(WorkCompletion.class, withSettings().stubOnly());
		AtomicBoolean delivered = new AtomicBoolean();
		when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
			if (delivered.getAndSet(true)) {
				return 0;
			}
			call.getArgument(1, CompletionHandler.class).onCompletion(completion);
			return 1;
		});
		return queue;
	}

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void aListenerStoppingItsOwnContainerDoesNotWaitForItself(boolean group) throws Exception {
		assertThat(PollerThreads.isPollerThread()).as("the test thread").isFalse();
		assertThat(PollerThreads.closeWhenPollEnds(() -> {
		})).as("nothing is deferred off a poller thread").isFalse();
		CompletionQueueListenerContainer container = new CompletionQueueListenerContainer("q", oneCompletion(),
				PollerSettings.DEFAULTS, new CompletionEventRouter());
		if (group) {
			PollerGroupSettings settings = PollerGroupSettings.DEFAULTS.withMode(PollingMode.BUSY);
			container.setPollerGroup(new PollerGroup("g", settings, new CompletionEventRouter()));
		}
		AtomicReference<@Nullable Thread> poller = new AtomicReference<>();
		AtomicBoolean polledByCurrent = new AtomicBoolean();
		AtomicBoolean pollerThread = new AtomicBoolean();
		AtomicBoolean stopped = new AtomicBoolean(true);
		AtomicBoolean listenerReturned = new AtomicBoolean();
		AtomicReference<@Nullable String> closedBy = new AtomicReference<>();
		CountDownLatch closed = new CountDownLatch(1);
		long[] stopNanos = { Long.MAX_VALUE };
		container.setupListener("listener", completion -> {
			poller.set(Thread.currentThread());
			polledByCurrent.set(container.isPolledByCurrentThread());
			pollerThread.set(PollerThreads.isPollerThread());
			PollerThreads.closeWhenPollEnds(() -> {
				closedBy.set(Thread.currentThread().getName() + (listenerReturned.get() ? " after" : " inside"));
				closed.countDown();
			});
			long start = System.nanoTime();
			stopped.set(container.stop(Duration.ofSeconds(20)));
			stopNanos[0] = System.nanoTime() - start;
			listenerReturned.set(true);
		}, false);
		container.start();
		assertThat(closed.await(30, TimeUnit.SECONDS)).as("the deferred close ran").isTrue();
		Thread thread = poller.get();
		assertThat(thread).isNotNull();
		assertThat(thread.getName()).isEqualTo(group ? "rdma-poller-g-0" : "rdma-poller-q");
		assertThat(polledByCurrent).as("isPolledByCurrentThread() in the listener").isTrue();
		assertThat(pollerThread).as("PollerThreads.isPollerThread() in the listener").isTrue();
		assertThat(Duration.ofNanos(stopNanos[0])).as("stop from the listener, shutdown timeout 20 s")
			.isLessThan(Duration.ofSeconds(5));
		assertThat(stopped).as("stop from the listener reports that the poller has not ended yet").isFalse();
		assertThat(closedBy.get()).as("who closed the deferred resource, and when")
			.isEqualTo(thread.getName() + " after");
		thread.join(TimeUnit.SECONDS.toMillis(10));
		assertThat(thread.isAlive()).as("the poller thread ended").isFalse();
		assertThat(container.isRunning()).isFalse();
		assertThat(container.awaitStop(System.nanoTime())).as("stop, seen from another thread").isTrue();
	}

	/**
	 * On a one-thread group, listener A (of queue a) starts container C (queue c is
	 * assigned to A's thread, which is busy in A and has not taken c in), then stops it:
	 * the thread that will poll c is the current one, so the stop does not wait for it
	 * (before: it waited the whole timeout, since only that thread could let c leave),
	 * and c leaves once A has returned.
	 */
	@Test
	void aListenerStoppingAQueueAssignedToItsThreadButNotTakenInDoesNotWaitForItself() throws Exception {
		PollerGroupSettings settings = PollerGroupSettings.DEFAULTS.withMode(PollingMode.BUSY).withThreads(1);
		PollerGroup group = new PollerGroup("g", settings, new CompletionEventRouter());
		CompletionQueueListenerContainer a = new CompletionQueueListenerContainer("a", oneCompletion(),
				PollerSettings.DEFAULTS, new CompletionEventRouter());
		a.setPollerGroup(group);
		CompletionQueueListenerContainer c = new CompletionQueueListenerContainer("c", oneCompletion(),
				PollerSettings.DEFAULTS, new CompletionEventRouter());
		c.setPollerGroup(group);
		c.setupListener("c-listener", completion -> {
		}, false);
		AtomicBoolean polledByCurrent = new AtomicBoolean();
		AtomicBoolean stopped = new AtomicBoolean(true);
		long[] stopNanos = { Long.MAX_VALUE };
		CountDownLatch done = new CountDownLatch(1);
		a.setupListener("a-listener", completion -> {
			// assigned to this (only) thread, taken in once this listener returns
			c.start();
			polledByCurrent.set(c.isPolledByCurrentThread());
			long start = System.nanoTime();
			stopped.set(c.stop(Duration.ofSeconds(3)));
			stopNanos[0] = System.nanoTime() - start;
			done.countDown();
		}, false);
		a.start();
		try {
			assertThat(done.await(30, TimeUnit.SECONDS)).as("a's listener ran").isTrue();
			assertThat(polledByCurrent).as("c.isPolledByCurrentThread() on its assigned thread").isTrue();
			assertThat(Duration.ofNanos(stopNanos[0])).as("c's stop from its assigned thread, timeout 3 s")
				.isLessThan(Duration.ofSeconds(1));
			assertThat(stopped).as("the stop reports that c has not left yet").isFalse();
			assertThat(c.awaitStop(System.nanoTime() + TimeUnit.SECONDS.toNanos(10)))
				.as("c left once a's listener returned")
				.isTrue();
			assertThat(c.isRunning()).isFalse();
		}
		finally {
			assertThat(a.stop(Duration.ofSeconds(10))).isTrue();
		}
	}

}
