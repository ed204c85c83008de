package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static dev.rdma.verbs.testing.NoNativeLeaks.awaitNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A listener that closes the application context on its first completion, on its
 * dedicated poller or on a poller group's thread: the close must not wait for the poller
 * (the current thread) nor for the shutdown timeout (20 s here), and once the listener
 * has returned every native object (queue, channel, device) is closed by the poller
 * thread.
 */
@Tag(DeviceTestSupport.TAG)
class StopFromListenerDeviceTest {

	@ParameterizedTest
	@ValueSource(strings = { "dedicated", "conns" })
	void aListenerClosingTheContextClosesItAtOnceAndLeavesNothingOpen(String poller) throws Exception {
		String device = DeviceTestSupport.deviceName();
		long baseline = NativeObjects.open();
		ApplicationContextRunner runner = new ApplicationContextRunner().withConfiguration(RdmaAutoConfigurations.all())
			.withUserConfiguration(App.class)
			.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=" + device, "rdma.shutdown-timeout=20s",
					"rdma.channels.ev0.device=nic0", "rdma.completion-queues.q0.entries=64",
					"rdma.completion-queues.q0.channel=ev0", "rdma.pollers.conns.threads=1",
					"rdma.completion-queues.q0.poller=" + poller);
		Closer[] closer = new Closer[1];
		runner.run(context -> {
			assertThat(context).hasNotFailed();
			closer[0] = context.getBean(Closer.class);
			LoopbackQueuePair qp = context.getBean(PollerGroupDeviceTest.Loopbacks.class).byQueue.get("q0");
			qp.postRecv(1, 0);
			qp.postSend(2, 0, 16, null);
			assertThat(closer[0].closed.await(60, TimeUnit.SECONDS)).as("the listener closed the context").isTrue();
		});
		Closer c = closer[0];
		assertThat(c.failure.get()).as("the close from the listener").isNull();
		Thread pollerThread = c.thread.get();
		assertThat(pollerThread).isNotNull();
		assertThat(pollerThread.getName()).startsWith("rdma-poller-");
		assertThat(c.closeNanos).as("close from the listener (ms), shutdown-timeout 20 s")
			.isLessThan(TimeUnit.SECONDS.toNanos(5));
		// the poller thread closes the queue, channel and device once the listener
		// returned
		awaitNativeObjectsClosed(baseline, Duration.ofSeconds(10), "the close from the listener");
		pollerThread.join(TimeUnit.SECONDS.toMillis(10));
		assertThat(pollerThread.isAlive()).as("poller thread " + pollerThread.getName() + " ended").isFalse();
	}

	@Configuration(proxyBeanMethods = false)
	static class App {

		@Bean
		PollerGroupDeviceTest.Loopbacks loopbacks(@Qualifier("nic0") Context nic0,
				Map<String, CompletionQueue> queues) {
			return new PollerGroupDeviceTest.Loopbacks(nic0, queues);
		}

		@Bean
		Closer closer() {
			return new Closer();
		}

	}

	static final class Closer extends ContextSelfCloser {

		@RdmaCompletionListener(queue = "q0")
		void onCompletion(WorkCompletion completion) {
			closeOnFirstCall();
		}

	}

}
