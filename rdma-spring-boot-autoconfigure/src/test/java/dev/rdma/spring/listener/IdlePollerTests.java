package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.CompletionQueue;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * An idle queue without a completion channel is not busy-polled unless busy mode is asked
 * for: by default its poller backs off to sleeps of max-sleep, so it polls a few hundred
 * times a second instead of millions and uses next to no CPU.
 */
class IdlePollerTests {

	private static final Duration WATCH = Duration.ofMillis(600);

	/** Past the spin and the first pauses. */
	private static final Duration WARM_UP = Duration.ofMillis(100);

	private static CompletionQueueListenerContainer container(CompletionQueue queue, PollerSettings settings) {
		return PollerStubs.container("idle", queue, settings);
	}

	@Test
	void idleQueueWithoutChannelBacksOffByDefault() throws Exception {
		AtomicLong polls = new AtomicLong();
		CompletionQueueListenerContainer container = container(PollerStubs.idleQueue(polls), PollerSettings.DEFAULTS);
		assertThat(container.mode()).isEqualTo(PollingMode.BACKOFF);
		long[] seen = PollerStubs.watch(container, polls, WARM_UP, WATCH);
		// max-sleep 1ms: about 600 polls in 600 ms; a spinning poller makes millions
		assertThat(seen[0]).as("polls of an idle backoff poller in " + WATCH).isLessThan(5_000);
		assertThat(Duration.ofNanos(seen[1])).as("CPU time of an idle backoff poller in " + WATCH)
			.isLessThan(WATCH.dividedBy(4));
	}

	@Test
	void maxSleepBoundsThePause() throws Exception {
		AtomicLong polls = new AtomicLong();
		PollerSettings settings = PollerSettings.DEFAULTS.withMaxSleep(Duration.ofMillis(20));
		long[] seen = PollerStubs.watch(container(PollerStubs.idleQueue(polls), settings), polls, WARM_UP, WATCH);
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
		CompletionQueueListenerContainer container = container(PollerStubs.idleQueue(polls), settings);
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
