package dev.rdma.spring.listener;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.WorkCompletionBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;
import static org.mockito.Mockito.withSettings;

/**
 * An idle queue without a completion channel is not busy-polled unless busy mode is asked
 * for: by default its poller backs off to sleeps of max-sleep, so it polls a few hundred
 * times a second instead of millions and uses next to no CPU.
 */
class IdlePollerTests {

	private static final Duration WATCH = Duration.ofMillis(600);

	/** An idle queue without a channel (a stub: a busy poller would fill a mock). */
	private static CompletionQueue idleQueue(AtomicLong polls) {
		CompletionQueue queue = mock(CompletionQueue.class, withSettings().stubOnly());
		when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
			polls.incrementAndGet();
			return 0;
		});
		return queue;
	}

	/** Polls and CPU nanoseconds of the poller over {@link #WATCH}, after a warm-up. */
	private static long[] watch(CompletionQueueListenerContainer container, AtomicLong polls) throws Exception {
		ThreadMXBean threads = ManagementFactory.getThreadMXBean();
		container.start();
		try {
			Thread.sleep(100); // past the spin and the first pauses
			Thread thread = container.thread();
			assertThat(thread).isNotNull();
			long polls0 = polls.get();
			long cpu0 = threads.getThreadCpuTime(thread.threadId());
			Thread.sleep(WATCH.toMillis());
			return new long[] { polls.get() - polls0, threads.getThreadCpuTime(thread.threadId()) - cpu0 };
		}
		finally {
			long start = System.nanoTime();
			assertThat(container.stop(Duration.ofSeconds(5))).as("poller stopped").isTrue();
			assertThat(Duration.ofNanos(System.nanoTime() - start)).as("a sleeping poller stops at once")
				.isLessThan(Duration.ofMillis(500));
		}
	}

	private static CompletionQueueListenerContainer container(CompletionQueue queue, PollerSettings settings) {
		CompletionQueueListenerContainer container = new CompletionQueueListenerContainer("idle", queue, settings,
				new CompletionEventRouter());
		container.setupListener("listener", completion -> {
		}, false);
		return container;
	}

	@Test
	void idleQueueWithoutChannelBacksOffByDefault() throws Exception {
		AtomicLong polls = new AtomicLong();
		CompletionQueueListenerContainer container = container(idleQueue(polls), PollerSettings.DEFAULTS);
		assertThat(container.mode()).isEqualTo(PollingMode.BACKOFF);
		long[] seen = watch(container, polls);
		// max-sleep 1ms: about 600 polls in 600 ms; a spinning poller makes millions
		assertThat(seen[0]).as("polls of an idle backoff poller in " + WATCH).isLessThan(5_000);
		assertThat(Duration.ofNanos(seen[1])).as("CPU time of an idle backoff poller in " + WATCH)
			.isLessThan(WATCH.dividedBy(4));
	}

	@Test
	void maxSleepBoundsThePause() throws Exception {
		AtomicLong polls = new AtomicLong();
		PollerSettings settings = PollerSettings.DEFAULTS.withMaxSleep(Duration.ofMillis(20));
		long[] seen = watch(container(idleQueue(polls), settings), polls);
		// 20 ms pauses: about 30 polls in 600 ms
		assertThat(seen[0]).isBetween(5L, 200L);
	}

	@Test
	void busyIsOnlyUsedWhenAskedFor() {
		assertThat(PollingMode.resolve(null, false)).isEqualTo(PollingMode.BACKOFF);
		assertThat(PollingMode.resolve(null, true)).isEqualTo(PollingMode.EVENT);
		assertThat(PollingMode.resolve(PollingMode.BUSY, false)).isEqualTo(PollingMode.BUSY);
		assertThat(PollingMode.BACKOFF.needsChannel()).isFalse();
		assertThat(PollingMode.BUSY.needsChannel()).isFalse();
		assertThat(PollingMode.EVENT.needsChannel()).isTrue();
		assertThat(PollingMode.ADAPTIVE.needsChannel()).isTrue();
	}

}
