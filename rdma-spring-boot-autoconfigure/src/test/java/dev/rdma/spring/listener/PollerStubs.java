package dev.rdma.spring.listener;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionHandler;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.WorkCompletionBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;
import static org.mockito.Mockito.withSettings;

/**
 * What the poller tests share: stub queues (stubs, not mocks: a busy poller would fill a
 * mock's invocation list), a container with a listener that does nothing, and the polls
 * and CPU time of a running poller.
 */
final class PollerStubs {

	private PollerStubs() {
	}

	/**
	 * A queue (stub) of a context with one completion vector, on {@code channel} (null:
	 * none); its polls are stubbed by the caller.
	 */
	static CompletionQueue queue(@Nullable CompletionChannel channel) {
		CompletionQueue queue = mock(CompletionQueue.class, withSettings().stubOnly());
		Context context = mock(Context.class, withSettings().stubOnly());
		when(context.numCompVectors()).thenReturn(1);
		when(queue.context()).thenReturn(context);
		if (channel != null) {
			when(queue.channel()).thenReturn(channel);
		}
		return queue;
	}

	/** An idle queue (stub) without a channel whose polls count into {@code polls}. */
	static CompletionQueue idleQueue(AtomicLong polls) {
		CompletionQueue queue = mock(CompletionQueue.class, withSettings().stubOnly());
		countPolls(queue, polls);
		return queue;
	}

	/** Makes every poll of {@code queue} find nothing and count into {@code polls}. */
	static void countPolls(CompletionQueue queue, AtomicLong polls) {
		when(queue.poll(any(WorkCompletionBuffer.class), any(CompletionHandler.class))).thenAnswer(call -> {
			polls.incrementAndGet();
			return 0;
		});
	}

	/** A container of {@code queue} named {@code name} whose listener does nothing. */
	static CompletionQueueListenerContainer container(String name, CompletionQueue queue, PollerSettings settings) {
		CompletionQueueListenerContainer container = new CompletionQueueListenerContainer(name, queue, settings,
				new CompletionEventRouter());
		container.setupListener("listener", completion -> {
		}, false);
		return container;
	}

	/**
	 * Starts {@code container} and measures its poller over {@code window}, from
	 * {@code after} on; then stops it (within 5 s).
	 * @return the polls, the poller's CPU nanoseconds, and the nanoseconds the stop took
	 */
	static long[] watch(CompletionQueueListenerContainer container, AtomicLong polls, Duration after, Duration window)
			throws Exception {
		ThreadMXBean threads = ManagementFactory.getThreadMXBean();
		container.start();
		long[] seen = new long[3];
		try {
			Thread.sleep(after.toMillis());
			Thread thread = container.thread();
			assertThat(thread).isNotNull();
			long polls0 = polls.get();
			long cpu0 = threads.getThreadCpuTime(thread.threadId());
			Thread.sleep(window.toMillis());
			seen[0] = polls.get() - polls0;
			seen[1] = threads.getThreadCpuTime(thread.threadId()) - cpu0;
		}
		finally {
			long start = System.nanoTime();
			assertThat(container.stop(Duration.ofSeconds(5))).as("poller stopped").isTrue();
			seen[2] = System.nanoTime() - start;
		}
		return seen;
	}

}
