package dev.rdma.spring.listener;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Durations too long for {@code Duration.toNanos()} (set programmatically: the properties
 * refuse more than a day) saturate: the stop paths stop, and a poller starts, instead of
 * throwing {@link ArithmeticException}.
 */
class LongDurationTests {

	private static final Duration HUGE = Duration.ofDays(200_000);

	@Test
	void listenerRegistryStopsWithAHugeShutdownTimeout() {
		RdmaListenerEndpointRegistry registry = new RdmaListenerEndpointRegistry();
		registry.setShutdownTimeout(HUGE);
		registry.start();
		registry.stop();
		assertThat(registry.isRunning()).isFalse();
	}

	@Test
	void connectionRegistryStopsWithAHugeShutdownTimeout() {
		RdmaConnectionRegistry registry = new RdmaConnectionRegistry(List.of(), HUGE);
		registry.start();
		registry.stop();
		assertThat(registry.isRunning()).isFalse();
	}

	@Test
	void pollerWithHugeSpinAndMaxSleepStartsAndStops() throws Exception {
		AtomicLong polls = new AtomicLong();
		PollerSettings settings = PollerSettings.DEFAULTS.withSpin(HUGE).withMaxSleep(HUGE);
		CompletionQueueListenerContainer container = PollerStubs.container("long", PollerStubs.idleQueue(polls),
				settings);
		container.start();
		long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
		while (polls.get() == 0 && System.nanoTime() < deadline) {
			Thread.sleep(10);
		}
		assertThat(polls.get()).as("polls").isPositive();
		assertThat(container.stop(HUGE)).as("stopped").isTrue();
	}

}
