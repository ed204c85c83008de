package dev.rdma.spring.listener;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
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
			assertThat(container.stop(Duration.ofSeconds(5))).as("poller stopped").isTrue();
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

	/**
	 * A stop wakes a poller that sleeps between polls instead of waiting for its sleep to
	 * end. Each pause is twice the last (max-sleep 30 s here): right after a poll that
	 * came at least 2 s after the one before, the poller is in a pause of at least 4 s,
	 * and a stop then must return in well under 2 s. (Once a wall-clock bound of 500 ms
	 * on every stop in this class; with pauses of 1-20 ms that bound could not tell a
	 * woken poller from one that finished its pause, and it failed on a loaded host.)
	 */
	@Test
	void aStopWakesASleepingPollerInsteadOfWaitingForItsPause() throws Exception {
		AtomicLong polls = new AtomicLong();
		PollerSettings settings = PollerSettings.DEFAULTS.withMaxSleep(Duration.ofSeconds(30));
		CompletionQueueListenerContainer container = container(idleQueue(polls), settings);
		container.start();
		boolean stopped = false;
		try {
			long last = polls.get();
			long lastAt = System.nanoTime();
			long deadline = lastAt + TimeUnit.SECONDS.toNanos(60);
			while (true) {
				assertThat(System.nanoTime() - deadline).as("a pause of 2 s within 60 s").isNegative();
				Thread.sleep(5);
				long now = polls.get();
				if (now != last) {
					long at = System.nanoTime();
					boolean longGap = at - lastAt >= TimeUnit.SECONDS.toNanos(2);
					last = now;
					lastAt = at;
					if (longGap) {
						break; // the pause that began with this poll is at least 4 s
					}
				}
			}
			long start = System.nanoTime();
			stopped = container.stop(Duration.ofSeconds(60));
			assertThat(stopped).as("poller stopped").isTrue();
			assertThat(Duration.ofNanos(System.nanoTime() - start))
				.as("the stop of a poller in a pause of at least 4 s (woken, not waited for)")
				.isLessThan(Duration.ofSeconds(2));
		}
		finally {
			if (!stopped) {
				container.stop(Duration.ofSeconds(60));
			}
		}
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
