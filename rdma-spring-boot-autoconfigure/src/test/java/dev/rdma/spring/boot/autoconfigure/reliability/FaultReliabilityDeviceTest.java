package dev.rdma.spring.boot.autoconfigure.reliability;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.health.contributor.Status;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;

import static dev.rdma.verbs.testing.NoNativeLeaks.assertNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Issue 7, faults: each with the application surviving where it should, and nothing
 * native left open.
 */
@Tag(DeviceTestSupport.TAG)
class FaultReliabilityDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(120);

	private static String device;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
	}

	private static void assertExactlyOnce(LoadApp.Recorder recorder, int n) {
		for (LoadApp.Track t : recorder.tracks()) {
			assertThat(t.delivered.get()).as(t.queue + " delivered").isEqualTo(n);
			assertThat(t.lost()).as(t.queue + " lost").isZero();
			assertThat(t.duplicates).as(t.queue + " duplicated").isZero();
			assertThat(t.outOfOrder).as(t.queue + " out of order").isZero();
		}
	}

	private static double failures(MeterRegistry registry, String queue) {
		Counter c = registry.find("rdma.listener.failures")
			.tag("queue", queue)
			.tag("exception", "IllegalStateException")
			.counter();
		return c == null ? 0 : c.count();
	}

	// ------------------------------------------------------------------ a listener
	// throwing on every 10th completion

	@Test
	void listenerThrowingOnEveryTenthCompletion() {
		int perQueue = Math.max(100, Reliability.completions() / 8);
		long open = NativeObjects.open();
		LoadApp.runner(device, PollingMode.EVENT, perQueue, "reliability.fail-every=10").run(context -> {
			assertThat(context).hasNotFailed();
			Duration took = LoadApp.drive(context, perQueue, TIMEOUT);
			LoadApp.Recorder recorder = context.getBean(LoadApp.Recorder.class);
			MeterRegistry registry = context.getBean(MeterRegistry.class);
			// the meters are updated after each batch: wait until they caught up with the
			// listeners
			DeviceTestSupport.await(TIMEOUT, () -> {
				for (LoadApp.Track t : recorder.tracks()) {
					if (failures(registry, t.queue) != t.thrown.get()) {
						return false;
					}
				}
				return true;
			}, "listener failures counted in rdma.listener.failures");
			assertExactlyOnce(recorder, perQueue);
			// per-completion listeners: exactly one failure per 10 completions; batch
			// listeners: one per failing batch
			assertThat(recorder.s0.thrown.get()).isEqualTo(perQueue / 10);
			assertThat(recorder.r1.thrown.get()).isEqualTo(perQueue / 10);
			assertThat(recorder.r0.thrown.get()).isPositive();
			assertThat(recorder.s1.thrown.get()).isPositive();
			Reliability.report("listener-throws-every-10th", "completions", 4L * perQueue, "durationMs",
					took.toMillis(), "failures.s0", (long) failures(registry, "s0"), "failures.r0",
					(long) failures(registry, "r0"), "failures.s1", (long) failures(registry, "s1"), "failures.r1",
					(long) failures(registry, "r1"));
		});
		assertNativeObjectsClosed(open, "the scenario");
	}

	// ------------------------------------------------------------------ a listener still
	// busy when shutdown starts

	/**
	 * Stops after the listener registry (lower phase): records when the registry's stop
	 * returned.
	 */
	static final class StopProbe implements SmartLifecycle {

		volatile boolean running;

		volatile long stoppedAt;

		@Override
		public void start() {
			running = true;
		}

		@Override
		public void stop() {
			stoppedAt = System.nanoTime();
			running = false;
		}

		@Override
		public boolean isRunning() {
			return running;
		}

		@Override
		public int getPhase() {
			return 0;
		}

	}

	@ParameterizedTest
	@ValueSource(strings = { "s0", "r0" }) // s0: per-completion listener (inside the
											// poll), r0: batch listener
	void listenerBusyWhenShutdownStarts(String queue) {
		long blockMs = 4000;
		long open = NativeObjects.open();
		long[] times = new long[3];
		AtomicReference<CompletionQueueListenerContainer> poller = new AtomicReference<>();
		LoadApp.runner(device, PollingMode.EVENT, 64, "rdma.shutdown-timeout=1s", "reliability.block-ms=" + blockMs)
			.withBean(StopProbe.class)
			.run(context -> {
				assertThat(context).hasNotFailed();
				LoadApp.Recorder recorder = context.getBean(LoadApp.Recorder.class);
				recorder.blockNext(queue);
				Loopback qp0 = context.getBean("qp0", Loopback.class);
				for (int i = 0; i < 8; i++) {
					qp0.postRecv(i, i);
					qp0.postSend(i, i, 8, null);
				}
				assertThat(recorder.blocked.await(60, TimeUnit.SECONDS)).as("listener of " + queue + " blocked")
					.isTrue();
				poller.set(context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainer(queue));
				StopProbe probe = context.getBean(StopProbe.class);
				long start = System.nanoTime();
				context.getSourceApplicationContext().close();
				times[0] = start;
				times[1] = probe.stoppedAt;
				times[2] = System.nanoTime();
			});
		long stopMs = (times[1] - times[0]) / 1_000_000;
		long closeMs = (times[2] - times[0]) / 1_000_000;
		Reliability.report("listener-busy-at-shutdown", "queue", queue, "shutdownTimeoutMs", 1000, "listenerBusyMs",
				blockMs, "registryStopMs", stopMs, "closeMs", closeMs);
		// the registry gave up on the busy poller after rdma.shutdown-timeout=1s, not
		// after the listener's 4 s
		assertThat(stopMs).as("listener registry stop (ms)").isBetween(900L, 3000L);
		// teardown completed: a per-completion listener runs inside the poll, so closing
		// its CQ waits for it
		assertThat(closeMs).as("context close (ms)").isLessThan(blockMs + 5000);
		DeviceTestSupport.await(Duration.ofSeconds(blockMs / 1000 + 10), () -> !poller.get().isRunning(),
				"the busy poller to end once its listener returned");
		assertNativeObjectsClosed(open, "the scenario");
	}

	// ------------------------------------------------------------------ a forced CQ
	// overrun

	@Configuration(proxyBeanMethods = false)
	static class OverrunApp {

		@Bean
		Loopback qpTiny(@Qualifier("nic0") Context nic0, @Qualifier("tiny") CompletionQueue tiny,
				@Qualifier("tinyRx") CompletionQueue tinyRx) {
			return new Loopback(nic0, tiny, tinyRx, 64, 64);
		}

	}

	@Test
	void cqOverrunIsReportedAndOtherQueuesKeepWorking() {
		int perQueue = Math.max(100, Reliability.completions() / 8);
		long open = NativeObjects.open();
		long[] closeMs = new long[1];
		LoadApp
			.runner(device, PollingMode.EVENT, perQueue, "rdma.completion-queues.tiny.type=legacy",
					"rdma.completion-queues.tiny.entries=1", "rdma.completion-queues.tinyRx.type=legacy",
					"rdma.completion-queues.tinyRx.entries=256")
			.withUserConfiguration(OverrunApp.class)
			.run(context -> {
				assertThat(context).hasNotFailed();
				RdmaHealthIndicator health = context.getBean(RdmaHealthIndicator.class);
				assertThat(health.health().getStatus()).isEqualTo(Status.UP);
				CompletionQueue tiny = context.getBean("tiny", CompletionQueue.class);
				Loopback qpTiny = context.getBean("qpTiny", Loopback.class);
				int tinyCqe = tiny.cqe();
				int sends = tinyCqe + 8;
				for (int i = 0; i < sends; i++) {
					qpTiny.postRecv(i, i);
				}
				for (int i = 0; i < sends; i++) {
					qpTiny.postSend(i, i, 8, null);
				}
				RdmaAsyncEventMonitor monitor = context.getBean(RdmaAsyncEventMonitor.class);
				DeviceTestSupport.await(TIMEOUT, () -> tiny.asyncErrors() > 0 && monitor.events("nic0").cqErrors() > 0,
						"IBV_EVENT_CQ_ERR on the tiny CQ, recorded by the async-event thread");
				var result = health.health();
				assertThat(result.getStatus()).isEqualTo(Status.DOWN);
				assertThat(result.getDetails().get("completionQueues").toString()).contains("tiny");
				MeterRegistry registry = context.getBean(MeterRegistry.class);
				double cqErrors = registry.get("rdma.cq.errors").tag("queue", "tiny").functionCounter().count();
				assertThat(cqErrors).isPositive();
				// the four queues with listeners keep delivering every completion
				Duration took = LoadApp.drive(context, perQueue, TIMEOUT);
				assertExactlyOnce(context.getBean(LoadApp.Recorder.class), perQueue);
				for (String q : LoadApp.QUEUES) {
					assertThat(context.getBean(q, CompletionQueue.class).asyncErrors()).as(q + " CQ errors").isZero();
				}
				long start = System.nanoTime();
				// ibv_destroy_cq waits for every async event of the CQ to be acked: a
				// clean close proves the ack
				context.getSourceApplicationContext().close();
				closeMs[0] = (System.nanoTime() - start) / 1_000_000;
				assertThat(tiny.isClosed()).isTrue();
				Reliability.report("cq-overrun", "tinyCqe", tinyCqe, "posted", sends, "cqErrEvents",
						monitor.events("nic0").cqErrors(), "health", result.getStatus(), "metric.rdma.cq.errors",
						(long) cqErrors, "otherQueuesCompletions", 4L * perQueue, "otherQueuesMs", took.toMillis(),
						"closeMs", closeMs[0]);
			});
		assertThat(closeMs[0]).isLessThan(5000);
		assertNativeObjectsClosed(open, "the scenario");
	}

	// ------------------------------------------------------------------ closing a CQ
	// while its poller is mid-batch

	@ParameterizedTest
	@CsvSource({ "s0, EVENT", "s0, BUSY", "r0, EVENT", "r0, ADAPTIVE" })
	void closingCqWhilePollerIsMidBatch(String queue, PollingMode mode) {
		long open = NativeObjects.open();
		LoadApp.runner(device, mode, 1024, "reliability.block-ms=20000").run(context -> {
			assertThat(context).hasNotFailed();
			LoadApp.Recorder recorder = context.getBean(LoadApp.Recorder.class);
			CompletionQueue cq = context.getBean(queue, CompletionQueue.class);
			recorder.blockNext(queue);
			Loopback qp0 = context.getBean("qp0", Loopback.class);
			for (int i = 0; i < 16; i++) {
				qp0.postRecv(i, i);
				qp0.postSend(i, i, 8, null);
			}
			assertThat(recorder.blocked.await(60, TimeUnit.SECONDS)).isTrue();
			// the listener is now inside a batch of this CQ; the QP goes first (a CQ in
			// use by a QP cannot be destroyed)
			qp0.close();
			AtomicReference<Throwable> closeFailure = new AtomicReference<>();
			Thread closer = Thread.ofPlatform().name("reliability-cq-closer").start(() -> {
				try {
					cq.close();
				}
				catch (Throwable ex) {
					closeFailure.set(ex);
				}
			});
			closer.join(300);
			boolean waitedForPoll = closer.isAlive();
			recorder.release.countDown();
			closer.join(15_000);
			assertThat(closer.isAlive()).as("close still blocked").isFalse();
			assertThat(closeFailure.get()).as("close failure").isNull();
			assertThat(cq.isClosed()).isTrue();
			// polling after close: an exception, not a crash
			try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
				assertThatThrownBy(() -> cq.poll(buffer)).isInstanceOf(IllegalStateException.class)
					.hasMessageContaining("closed");
			}
			// the poller meets the closed CQ: it counts a poll error and goes on (or
			// stops), never crashes
			MeterRegistry registry = context.getBean(MeterRegistry.class);
			DeviceTestSupport.await(TIMEOUT, () -> {
				Counter c = registry.find("rdma.poll.errors").tag("queue", queue).counter();
				return (c != null && c.count() > 0)
						|| !context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainer(queue).isRunning();
			}, "the poller of " + queue + " to notice the closed CQ");
			// the other QP and its queues keep working
			LoadApp.drive(context, 0, 512, TIMEOUT, "qp1");
			assertThat(recorder.s1.delivered.get()).isEqualTo(512);
			assertThat(recorder.r1.delivered.get()).isEqualTo(512);
			Counter pollErrors = registry.find("rdma.poll.errors").tag("queue", queue).counter();
			Reliability.report("close-cq-mid-batch", "queue", queue, "mode", Reliability.lower(mode),
					"closeWaitedForPoll", waitedForPoll, "pollErrors",
					pollErrors == null ? 0 : (long) pollErrors.count(), "otherQueuesCompletions", 1024);
		});
		assertNativeObjectsClosed(open, "the scenario");
	}

	// ------------------------------------------------------------------ shutdown with
	// unacked events on every CQ

	@Test
	void shutdownWithUnackedEventsOnEveryCqFinishesWithinFiveSeconds() {
		long open = NativeObjects.open();
		long[] closeMs = new long[1];
		CompletionQueue[] queues = new CompletionQueue[4];
		String[] ackBatch = new String[4];
		for (int i = 0; i < 4; i++) {
			ackBatch[i] = "rdma.completion-queues." + LoadApp.QUEUES[i] + ".ack-batch=1000000";
		}
		int rounds = 6;
		int perRound = 16;
		LoadApp.runner(device, PollingMode.EVENT, rounds * perRound, ackBatch).run(context -> {
			assertThat(context).hasNotFailed();
			for (int round = 0; round < rounds; round++) {
				LoadApp.drive(context, round * perRound, perRound, TIMEOUT, "qp0", "qp1");
				Thread.sleep(20); // let the pollers go idle, arm and wait: the next round
									// raises events
			}
			LoadApp.Recorder recorder = context.getBean(LoadApp.Recorder.class);
			long unacked = 0;
			for (int i = 0; i < 4; i++) {
				queues[i] = context.getBean(LoadApp.QUEUES[i], CompletionQueue.class);
				assertThat(queues[i].eventsUnacked()).as(LoadApp.QUEUES[i] + " unacked events").isPositive();
				unacked += queues[i].eventsUnacked();
			}
			long start = System.nanoTime();
			context.getSourceApplicationContext().close();
			closeMs[0] = (System.nanoTime() - start) / 1_000_000;
			Reliability.report("shutdown-unacked-events", "queues", 4, "unackedAtShutdown", unacked, "closeMs",
					closeMs[0]);
			assertExactlyOnce(recorder, rounds * perRound);
		});
		for (CompletionQueue q : queues) {
			assertThat(q.isClosed()).isTrue();
			assertThat(q.eventsUnacked()).isZero();
		}
		assertThat(closeMs[0]).as("shutdown ms").isLessThan(5000);
		assertNativeObjectsClosed(open, "the scenario");
	}

}
