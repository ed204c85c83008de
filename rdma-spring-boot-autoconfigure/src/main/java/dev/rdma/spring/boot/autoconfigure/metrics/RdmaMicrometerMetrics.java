package dev.rdma.spring.boot.autoconfigure.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.SmartInitializingSingleton;

import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.spring.listener.PollerMetrics;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.WcStatus;

/**
 * Micrometer meters of the RDMA pollers, updated once per poll batch:
 * <ul>
 * <li>{@code rdma.completions} (counter; queue, status)</li>
 * <li>{@code rdma.poll.batch.size} (distribution summary; queue)</li>
 * <li>{@code rdma.events} and {@code rdma.events.acked} (counters; queue)</li>
 * <li>{@code rdma.events.missed} (counter of completion events that never came: the
 * poller found their completions by re-polling the armed queue; queue)</li>
 * <li>{@code rdma.listener} (timer per batch of listener calls; queue, result,
 * exception)</li>
 * <li>{@code rdma.listener.failures} (counter of listener calls that threw; queue,
 * exception)</li>
 * <li>{@code rdma.poll.errors} (counter; queue)</li>
 * <li>{@code rdma.cq.errors} (function counter of IBV_EVENT_CQ_ERR; queue, device)</li>
 * </ul>
 * Every meter of a queue exists from startup, at zero, when its poller is created (a
 * dashboard or alert finds {@code rdma.listener.failures} before the first failure): the
 * failure counter and the completion counter start with the series {@code exception=none}
 * and {@code status=success}; the series of a given exception or status are added when it
 * first occurs.
 */
public class RdmaMicrometerMetrics implements PollerMetrics.Factory, SmartInitializingSingleton {

	private final MeterRegistry registry;

	private final RdmaResources resources;

	public RdmaMicrometerMetrics(MeterRegistry registry, RdmaResources resources) {
		this.registry = registry;
		this.resources = resources;
	}

	/** Binds the per-queue CQ error counters once every queue bean exists. */
	@Override
	public void afterSingletonsInstantiated() {
		if (resources != null) {
			resources.queues()
				.forEach((name, queue) -> FunctionCounter.builder("rdma.cq.errors", queue, CompletionQueue::asyncErrors)
					.description("Asynchronous CQ errors (IBV_EVENT_CQ_ERR, e.g. overrun)")
					.tags("queue", name, "device", queue.context().deviceName())
					.register(registry));
		}
	}

	@Override
	public PollerMetrics forQueue(String queue) {
		return new QueueMeters(queue);
	}

	private final class QueueMeters implements PollerMetrics {

		private final String queue;

		private final Counter[] completions = new Counter[WcStatus.values().length];

		private final DistributionSummary batchSize;

		private final Counter events;

		private final Counter acks;

		private final Counter missedEvents;

		private final Counter pollErrors;

		private final Timer success;

		private final Map<Class<?>, Timer> failureTimers = new ConcurrentHashMap<>();

		private final Map<Class<?>, Counter> failureCounters = new ConcurrentHashMap<>();

		QueueMeters(String queue) {
			this.queue = queue;
			this.batchSize = DistributionSummary.builder("rdma.poll.batch.size")
				.description("Completions per non-empty poll")
				.tags("queue", queue)
				.register(registry);
			this.events = Counter.builder("rdma.events")
				.description("Completion events got")
				.tags("queue", queue)
				.register(registry);
			this.acks = Counter.builder("rdma.events.acked")
				.description("Completion events acknowledged")
				.tags("queue", queue)
				.register(registry);
			this.missedEvents = Counter.builder("rdma.events.missed")
				.description("Completion events that never came (completions found by re-polling the armed queue)")
				.tags("queue", queue)
				.register(registry);
			this.pollErrors = Counter.builder("rdma.poll.errors")
				.description("Failed polls")
				.tags("queue", queue)
				.register(registry);
			this.success = Timer.builder("rdma.listener")
				.description("Listener calls of one poll batch")
				.tags("queue", queue, "result", "success", "exception", "none")
				.register(registry);
			// the success counter is the common case: create it eagerly
			completions[WcStatus.SUCCESS.ordinal()] = completionCounter(WcStatus.SUCCESS);
			// the failure counter exists (at zero) before the first failure
			failureCounter("none");
		}

		private Counter completionCounter(WcStatus status) {
			return Counter.builder("rdma.completions")
				.description("Work completions polled")
				.tags("queue", queue, "status", status.name().toLowerCase(java.util.Locale.ROOT))
				.register(registry);
		}

		private Counter failureCounter(String exception) {
			return Counter.builder("rdma.listener.failures")
				.description("Listener calls that threw")
				.tags("queue", queue, "exception", exception)
				.register(registry);
		}

		@Override
		public void batch(int size, long[] statusCounts) {
			batchSize.record(size);
			for (int i = 0; i < statusCounts.length; i++) {
				long count = statusCounts[i];
				if (count != 0) {
					Counter counter = completions[i];
					if (counter == null) {
						counter = completionCounter(WcStatus.values()[i]);
						completions[i] = counter;
					}
					counter.increment(count);
				}
			}
		}

		@Override
		public void listener(long nanos, int failures, @Nullable Throwable firstFailure) {
			if (firstFailure == null) {
				success.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
				return;
			}
			Class<?> type = firstFailure.getClass();
			failureTimers
				.computeIfAbsent(type,
						t -> Timer.builder("rdma.listener")
							.description("Listener calls of one poll batch")
							.tags("queue", queue, "result", "failure", "exception", t.getSimpleName())
							.register(registry))
				.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
			failureCounters.computeIfAbsent(type, t -> failureCounter(t.getSimpleName())).increment(failures);
		}

		@Override
		public void events(long count) {
			events.increment(count);
		}

		@Override
		public void acks(long count) {
			acks.increment(count);
		}

		@Override
		public void missedEvent() {
			missedEvents.increment();
		}

		@Override
		public void pollError(Throwable error) {
			pollErrors.increment();
		}

	}

}
