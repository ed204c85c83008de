package dev.rdma.spring.boot.autoconfigure.reliability;

import java.time.Duration;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static dev.rdma.verbs.testing.NoNativeLeaks.assertNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 7, load: {@link Reliability#completions()} completions per polling mode through
 * listeners on four CQs sharing one completion channel. Every wr_id completes exactly
 * once and in order on its queue, events got equal events acked after shutdown, the
 * pollers stop, and no native object stays open.
 */
@Tag(DeviceTestSupport.TAG)
class LoadReliabilityDeviceTest {

	private static String device;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
	}

	@ParameterizedTest
	@EnumSource(PollingMode.class)
	void everyWorkRequestCompletesExactlyOnce(PollingMode mode) {
		int completions = Reliability.completions();
		int perQueue = Math.max(1, completions / 4);
		long open = NativeObjects.open();
		long[] closeMillis = new long[1];
		CompletionQueue[] queues = new CompletionQueue[4];
		LoadApp.Recorder[] recorder = new LoadApp.Recorder[1];
		Duration timeout = Duration.ofSeconds(120 + completions / 1000);
		LoadApp.runner(device, mode, perQueue).run(context -> {
			assertThat(context).hasNotFailed();
			recorder[0] = context.getBean(LoadApp.Recorder.class);
			for (int i = 0; i < 4; i++) {
				queues[i] = context.getBean(LoadApp.QUEUES[i], CompletionQueue.class);
				assertThat(queues[i].channel()).isSameAs(queues[0].channel());
			}
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			assertThat(registry.getListenerContainers()).hasSize(4).allMatch(p -> p.mode() == mode);
			Duration took = LoadApp.drive(context, perQueue, timeout);
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			// a poller meters a batch once its listener calls returned, so the last
			// batch's count may still be on its way when drive() saw every delivery
			DeviceTestSupport.await(Duration.ofSeconds(10), () -> metered(meters) >= 4L * perQueue,
					4L * perQueue + " completions metered (metered: " + metered(meters) + ")");
			double metered = metered(meters);
			long start = System.nanoTime();
			context.getSourceApplicationContext().close();
			closeMillis[0] = (System.nanoTime() - start) / 1_000_000;
			for (CompletionQueueListenerContainer poller : registry.getListenerContainers()) {
				assertThat(poller.isRunning()).as("poller of " + poller.queue() + " after close").isFalse();
			}
			long got = 0;
			long acked = 0;
			for (CompletionQueue q : queues) {
				got += q.eventsGot();
				acked += q.eventsAcked();
			}
			long rate = took.toNanos() == 0 ? 0 : (long) (4L * perQueue * 1e9 / took.toNanos());
			Reliability.report("load", "mode", Reliability.lower(mode), "completions", 4L * perQueue, "durationMs",
					took.toMillis(), "completionsPerSec", rate, "eventsGot", got, "eventsAcked", acked, "metered",
					(long) metered, "closeMs", closeMillis[0]);
			assertThat((long) metered).isEqualTo(4L * perQueue);
		});
		for (int i = 0; i < 4; i++) {
			CompletionQueue q = queues[i];
			assertThat(q.isClosed()).as(LoadApp.QUEUES[i] + " closed").isTrue();
			assertThat(q.eventsAcked()).as(LoadApp.QUEUES[i] + " events acked == got").isEqualTo(q.eventsGot());
			if (mode == PollingMode.EVENT) {
				assertThat(q.eventsGot()).as(LoadApp.QUEUES[i] + " got events").isPositive();
			}
		}
		for (LoadApp.Track t : recorder[0].tracks()) {
			assertThat(t.delivered.get()).as(t.queue + " delivered").isEqualTo(perQueue);
			assertThat(t.lost()).as(t.queue + " lost wr_ids").isZero();
			assertThat(t.duplicates).as(t.queue + " duplicated wr_ids").isZero();
			assertThat(t.outOfRange).as(t.queue + " unknown wr_ids").isZero();
			assertThat(t.outOfOrder).as(t.queue + " out-of-order wr_ids").isZero();
			assertThat(t.failedStatus.get()).as(t.queue + " failed completions").isZero();
		}
		assertThat(closeMillis[0]).as("shutdown ms").isLessThan(5000);
		assertNativeObjectsClosed(open, "the application closed");
	}

	private static double metered(MeterRegistry meters) {
		double metered = 0;
		for (String q : LoadApp.QUEUES) {
			metered += meters.get("rdma.completions").tag("queue", q).tag("status", "success").counter().count();
		}
		return metered;
	}

}
