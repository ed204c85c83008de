package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WorkCompletionBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;
import static org.mockito.Mockito.withSettings;

/**
 * The pauses of a dedicated poller: an idle adaptive poller spins for {@code spin} after
 * a completion only, not after every wait that ended without one; a poller whose polls
 * fail pauses 100 ms between attempts also while its channel is readable.
 */
class PollLoopPauseTests {

	private static CompletionQueueListenerContainer container(CompletionQueue queue, PollerSettings settings) {
		return PollerStubs.container("q", queue, settings);
	}

	/** {@link PollerStubs#watch}, and the poller stops at once. */
	private static long[] watch(CompletionQueueListenerContainer container, AtomicLong polls, Duration after,
			Duration window) throws Exception {
		long[] seen = PollerStubs.watch(container, polls, after, window);
		assertThat(Duration.ofNanos(seen[2])).as("the poller stops at once").isLessThan(Duration.ofMillis(500));
		return seen;
	}

	@Test
	void anIdleAdaptivePollerDoesNotSpinAgainAfterEachWait() throws Exception {
		CompletionChannel channel = mock(CompletionChannel.class, withSettings().stubOnly());
		when(channel.await(anyLong(), any(Waker.class))).thenAnswer(call -> {
			Thread.sleep(50); // a wait that ends without an event (timeout, a wake-up)
			return CompletionChannel.WaitResult.TIMEOUT;
		});
		CompletionQueue queue = PollerStubs.queue(channel);
		AtomicLong polls = new AtomicLong();
		PollerStubs.countPolls(queue, polls);
		PollerSettings settings = PollerSettings.DEFAULTS.withMode(PollingMode.ADAPTIVE)
			.withSpin(Duration.ofMillis(100));
		Duration window = Duration.ofMillis(1000);
		long[] seen = watch(container(queue, settings), polls, Duration.ofMillis(300), window);
		// two polls per 50 ms wait (drain, arm, drain): about 40 in 1 s; a poller that
		// spins 100 ms after each wait polls tens of thousands of times
		assertThat(seen[0]).as("polls of an idle adaptive poller in " + window).isLessThan(500);
		assertThat(Duration.ofNanos(seen[1])).as("CPU time of an idle adaptive poller in " + window)
			.isLessThan(window.dividedBy(4));
	}

	@Test
	void aFailingPollPausesBetweenAttemptsAlsoWhileTheChannelIsReadable() throws Exception {
		CompletionChannel channel = mock(CompletionChannel.class, withSettings().stubOnly());
		// an event is pending on the fd for ever (nothing takes it)
		when(channel.await(anyLong(), any(Waker.class))).thenReturn(CompletionChannel.WaitResult.READY);
		CompletionQueue queue = PollerStubs.queue(channel);
		AtomicLong polls = new AtomicLong();
		List<Long> attempts = new CopyOnWriteArrayList<>();
		when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
			attempts.add(System.nanoTime());
			polls.incrementAndGet();
			throw new IllegalStateException("ibv_poll_cq failed: a CQ in the error state");
		});
		PollerSettings settings = PollerSettings.DEFAULTS.withMode(PollingMode.EVENT);
		Duration window = Duration.ofMillis(1000);
		long[] seen = watch(container(queue, settings), polls, Duration.ofMillis(50), window);
		// one attempt per 100 ms pause: at most about 10 (fewer on a loaded machine,
		// whose
		// thread wakes late); a pause that ends when the fd is readable retries thousands
		// of times
		assertThat(seen[0]).as("poll attempts of a failing queue in " + window).isBetween(1L, 15L);
		assertThat(attempts).as("attempts in all").hasSizeGreaterThanOrEqualTo(3);
		for (int i = 1; i < attempts.size(); i++) {
			assertThat(Duration.ofNanos(attempts.get(i) - attempts.get(i - 1)))
				.as("the pause before attempt " + (i + 1) + " (the loop pauses 100 ms after a failed poll)")
				.isGreaterThanOrEqualTo(Duration.ofMillis(99));
		}
	}

}
