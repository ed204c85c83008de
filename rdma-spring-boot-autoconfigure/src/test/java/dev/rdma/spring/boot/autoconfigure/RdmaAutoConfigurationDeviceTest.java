package dev.rdma.spring.boot.autoconfigure;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.LazyInitializationBeanFactoryPostProcessor;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The auto-configuration on a real device (Soft-RoCE rxe0 in the test VM): beans,
 * listeners, metrics, health.
 */
@Tag(DeviceTestSupport.TAG)
class RdmaAutoConfigurationDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(60);

	private static final int N = 32;

	private static String device;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
	}

	private ApplicationContextRunner runner() {
		return RdmaAutoConfigurations.onDevice(device);
	}

	// ------------------------------------------------------------------ the issue's yml

	static class QualifiedUser {

		final ExtendedCompletionQueue rx;

		final CompletionQueue tx;

		final CompletionChannel events;

		final Context nic;

		QualifiedUser(@Qualifier("rx") ExtendedCompletionQueue rx, @Qualifier("tx") CompletionQueue tx,
				@Qualifier("events0") CompletionChannel events, @Qualifier("nic0") Context nic) {
			this.rx = rx;
			this.tx = tx;
			this.events = events;
			this.nic = nic;
		}

	}

	@Test
	void issueYamlCreatesNamedBeans() {
		long open = NativeObjects.open();
		runner().withBean(QualifiedUser.class)
			.withPropertyValues("rdma.channels.events0.device=nic0", "rdma.channels.events0.non-blocking=true",
					"rdma.completion-queues.rx.device=nic0", "rdma.completion-queues.rx.type=extended",
					"rdma.completion-queues.rx.entries=4096", "rdma.completion-queues.rx.comp-vector=auto",
					"rdma.completion-queues.rx.channel=events0",
					"rdma.completion-queues.rx.wc-flags=byte-len,imm,qp-num,src-qp",
					"rdma.completion-queues.rx.flags=single-threaded",
					"rdma.completion-queues.rx.polling.mode=adaptive",
					"rdma.completion-queues.rx.polling.batch-size=32", "rdma.completion-queues.rx.polling.spin=50us",
					"rdma.completion-queues.rx.ack-batch=64", "rdma.completion-queues.tx.device=nic0",
					"rdma.completion-queues.tx.type=legacy", "rdma.completion-queues.tx.entries=1024")
			.run(context -> {
				assertThat(context).hasNotFailed();
				QualifiedUser user = context.getBean(QualifiedUser.class);
				// one RdmaProperties at run time: the resources read the bean, not a
				// binding of their own
				assertThat(context.getBean(RdmaResources.class).properties())
					.isSameAs(context.getBean(RdmaProperties.class));
				assertThat(user.nic.deviceName()).isEqualTo(device);
				assertThat(user.rx.cqe()).isGreaterThanOrEqualTo(4096);
				assertThat(user.rx.context()).isSameAs(user.nic);
				assertThat(user.rx.channel()).isSameAs(user.events);
				assertThat(user.rx.provides(WcExFlag.SRC_QP)).isTrue();
				assertThat(user.tx.cqe()).isGreaterThanOrEqualTo(1024);
				assertThat(user.tx.channel()).isNull();
				assertThat(context.getBean("rx")).isSameAs(user.rx);
				assertThat(context.getBean(RdmaHealthIndicator.class).health().getStatus()).isEqualTo(Status.UP);
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	// ------------------------------------------------------------------ listeners

	static class Listeners {

		final Set<String> rxThreads = ConcurrentHashMap.newKeySet();

		final Set<String> txThreads = ConcurrentHashMap.newKeySet();

		final AtomicInteger rx = new AtomicInteger();

		final AtomicInteger tx = new AtomicInteger();

		final AtomicInteger failed = new AtomicInteger();

		final AtomicLong rxBytes = new AtomicLong();

		final List<Long> txIds = Collections.synchronizedList(new ArrayList<>());

		volatile boolean throwOnOdd;

		@RdmaCompletionListener(queue = "rx", fields = WcExFlag.BYTE_LEN)
		void onRx(WorkCompletion wc) {
			rxThreads.add(Thread.currentThread().getName());
			if (!wc.isSuccess()) {
				failed.incrementAndGet();
			}
			else {
				rxBytes.addAndGet(wc.byteLen());
			}
			rx.incrementAndGet();
			if (throwOnOdd && (wc.wrId() & 1) == 1) {
				throw new IllegalStateException("listener failure for wr_id " + wc.wrId());
			}
		}

		@RdmaCompletionListener(queue = "tx", batch = true)
		void onTx(CompletionBatch batch) {
			txThreads.add(Thread.currentThread().getName());
			for (int i = 0; i < batch.size(); i++) {
				WorkCompletion wc = batch.get(i);
				if (!wc.isSuccess()) {
					failed.incrementAndGet();
				}
				txIds.add(wc.wrId());
			}
			tx.addAndGet(batch.size());
		}

	}

	@Configuration(proxyBeanMethods = false)
	static class ListenerApp {

		@Bean
		Listeners listeners() {
			return new Listeners();
		}

		@Bean
		MeterRegistry meterRegistry() {
			return new SimpleMeterRegistry();
		}

		/** A user bean that depends on the queues: destroyed before them. */
		@Bean
		Loopback loopback(@Qualifier("nic0") Context nic0, @Qualifier("tx") CompletionQueue tx,
				@Qualifier("rx") CompletionQueue rx) {
			return new Loopback(nic0, tx, rx, 64, 256);
		}

	}

	private ApplicationContextRunner listenerRunner(PollingMode mode, String... more) {
		String m = mode.name().toLowerCase(java.util.Locale.ROOT);
		return runner().withUserConfiguration(ListenerApp.class)
			.withPropertyValues("rdma.channels.events0.device=nic0", "rdma.completion-queues.rx.type=extended",
					"rdma.completion-queues.rx.entries=256", "rdma.completion-queues.rx.channel=events0",
					"rdma.completion-queues.rx.wc-flags=byte-len,imm,qp-num,src-qp",
					"rdma.completion-queues.rx.polling.mode=" + m, "rdma.completion-queues.tx.type=legacy",
					"rdma.completion-queues.tx.entries=256", "rdma.completion-queues.tx.channel=events0",
					"rdma.completion-queues.tx.polling.mode=" + m, "rdma.completion-queues.tx.polling.batch-size=8")
			.withPropertyValues(more);
	}

	/**
	 * Posts {@code n} receives and {@code n} sends starting at wr_id {@code first}; waits
	 * until both arrived.
	 */
	private static void exchange(AssertableApplicationContext context, int first, int n) {
		Loopback loopback = context.getBean(Loopback.class);
		Listeners listeners = context.getBean(Listeners.class);
		int rxBefore = listeners.rx.get();
		int txBefore = listeners.tx.get();
		for (int i = 0; i < n; i++) {
			loopback.postRecv(first + i, i);
		}
		for (int i = 0; i < n; i++) {
			loopback.postSend(first + i, i, 100, null);
		}
		DeviceTestSupport.await(TIMEOUT, () -> listeners.rx.get() >= rxBefore + n && listeners.tx.get() >= txBefore + n,
				n + " receive and send completions");
	}

	@ParameterizedTest
	@EnumSource(PollingMode.class)
	void completionsReachBothListenersOnTheirPollerThreads(PollingMode mode) {
		long open = NativeObjects.open();
		listenerRunner(mode).run(context -> {
			assertThat(context).hasNotFailed();
			exchange(context, 0, N);
			Listeners listeners = context.getBean(Listeners.class);
			assertThat(listeners.rx.get()).isEqualTo(N);
			assertThat(listeners.tx.get()).isEqualTo(N);
			assertThat(listeners.failed.get()).isZero();
			assertThat(listeners.rxBytes.get()).isEqualTo(100L * N);
			assertThat(listeners.rxThreads).containsExactly("rdma-poller-rx");
			assertThat(listeners.txThreads).containsExactly("rdma-poller-tx");
			synchronized (listeners.txIds) {
				assertThat(listeners.txIds).hasSize(N).isSorted();
			}
			MeterRegistry registry = context.getBean(MeterRegistry.class);
			DeviceTestSupport.await(TIMEOUT, () -> completions(registry, "rx") == N && completions(registry, "tx") == N,
					"meters to count the completions");
			assertThat(registry.get("rdma.poll.batch.size").tag("queue", "tx").summary().totalAmount()).isEqualTo(N);
			assertThat(registry.get("rdma.listener").tag("queue", "rx").tag("result", "success").timer().count())
				.isPositive();
			if (mode == PollingMode.EVENT) {
				// The first completions may be drained before the poller first armed the
				// CQ (thread start-up);
				// once it has drained them it is armed and waiting, so a second exchange
				// must raise events.
				exchange(context, N, N);
				DeviceTestSupport.await(TIMEOUT, () -> {
					var events = registry.find("rdma.events").tag("queue", "rx").counter();
					return events != null && events.count() > 0;
				}, "an rx completion event counted");
			}
			assertThat(context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainer("rx").mode())
				.isEqualTo(mode);
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void defaultsLogEachResourceWithItsThreadAndAnIdleQueueWithoutChannelBacksOff(CapturedOutput output) {
		long open = NativeObjects.open();
		runner().withUserConfiguration(ListenerApp.class)
			.withPropertyValues("rdma.channels.events0.device=nic0", "rdma.completion-queues.rx.type=extended",
					"rdma.completion-queues.rx.entries=256", "rdma.completion-queues.rx.channel=events0",
					"rdma.completion-queues.rx.wc-flags=byte-len,imm,qp-num,src-qp",
					"rdma.completion-queues.tx.type=legacy", "rdma.completion-queues.tx.entries=256")
			.run(context -> {
				assertThat(context).hasNotFailed();
				RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
				assertThat(registry.getListenerContainer("rx").mode()).isEqualTo(PollingMode.EVENT);
				assertThat(registry.getListenerContainer("tx").mode()).isEqualTo(PollingMode.BACKOFF);
				assertThat(output.getOut())
					.contains("RDMA device 'nic0': " + device
							+ ", port 1; asynchronous events read by thread rdma-async-" + device)
					.contains("RDMA completion channel 'events0' on device 'nic0': events of queue(s) [rx]")
					.contains("RDMA completion queue 'rx': type extended")
					.contains("polling event (waits on the channel when idle)")
					// a queue with a channel and no mode of its own: the default poller
					// group
					.contains("on thread rdma-poller-default-0")
					.contains("RDMA completion queue 'tx': type legacy")
					.contains("channel none; polling backoff (sleeps up to 1000us between polls when idle)")
					.contains("on thread rdma-poller-tx");
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				assertThat(meters.get("rdma.listener.failures").tag("queue", "rx").counter().count()).isZero();
				assertThat(context.getBean(RdmaStatus.class).isActive()).isTrue();
				// the idle tx poller (no channel, no mode set) does not spin: it parks
				// between polls, once per max-sleep (1 ms) at most. Counted, not timed:
				// its CPU share is what the emulator charges per wake-up, which moves
				// with
				// the host (0.32 of a vCPU once in CI for the same parks a second; a
				// spinning poller parks 0 times)
				Thread tx = registry.getListenerContainer("tx").thread();
				ThreadMXBean threads = ManagementFactory.getThreadMXBean();
				Thread.sleep(200);
				long parked = threads.getThreadInfo(tx.threadId()).getWaitedCount();
				long start = System.nanoTime();
				Thread.sleep(1000);
				long parks = threads.getThreadInfo(tx.threadId()).getWaitedCount() - parked;
				double seconds = (System.nanoTime() - start) / 1e9;
				assertThat(parks).as("parks of the idle backoff poller in %.3f s", seconds)
					.isBetween(100L, Math.round(seconds * 1100));
				exchange(context, 0, N); // and it still delivers
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	private static double completions(MeterRegistry registry, String queue) {
		var counter = registry.find("rdma.completions").tag("queue", queue).tag("status", "success").counter();
		return counter == null ? 0 : counter.count();
	}

	/**
	 * Under {@code spring.main.lazy-initialization=true} nothing injects the async-event
	 * monitor; it still runs from startup, so a CQ overrun or a port going down reaches
	 * health, meters and the log.
	 */
	@Test
	void asyncEventThreadRunsUnderLazyInitialization() {
		long open = NativeObjects.open();
		String name = "rdma-async-" + device;
		Set<Thread> before = Thread.getAllStackTraces().keySet();
		runner()
			.withInitializer(
					context -> context.addBeanFactoryPostProcessor(new LazyInitializationBeanFactoryPostProcessor()))
			.run(context -> {
				assertThat(context).hasNotFailed();
				assertThat(Thread.getAllStackTraces().keySet())
					.filteredOn(t -> t.getName().equals(name) && t.isAlive() && !before.contains(t))
					.as("a new " + name + " thread after a lazy startup")
					.hasSize(1);
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	/**
	 * A context's stop() then start() (pause and resume): the pollers stop, completions
	 * that arrive meanwhile wait in their queues, and after the start new pollers deliver
	 * them and what follows.
	 */
	@ParameterizedTest
	@EnumSource(value = PollingMode.class, names = { "EVENT", "BUSY" })
	void contextStopThenStartPollsTheQueuesAgain(PollingMode mode) {
		long open = NativeObjects.open();
		listenerRunner(mode).run(context -> {
			assertThat(context).hasNotFailed();
			exchange(context, 0, N);
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			Thread firstRx = registry.getListenerContainer("rx").thread();
			context.stop();
			assertThat(registry.isRunning()).isFalse();
			assertThat(registry.getListenerContainer("rx").isRunning()).isFalse();
			assertThat(registry.getListenerContainer("tx").isRunning()).isFalse();
			Listeners listeners = context.getBean(Listeners.class);
			Loopback loopback = context.getBean(Loopback.class);
			for (int i = 0; i < N; i++) {
				loopback.postRecv(N + i, i);
			}
			for (int i = 0; i < N; i++) {
				loopback.postSend(N + i, i, 100, null);
			}
			Thread.sleep(200);
			assertThat(listeners.rx.get()).as("nothing delivered while stopped").isEqualTo(N);

			context.start();
			assertThat(registry.isRunning()).isTrue();
			assertThat(registry.getListenerContainer("rx").isRunning()).as("rx polled again").isTrue();
			assertThat(registry.getListenerContainer("tx").isRunning()).as("tx polled again").isTrue();
			assertThat(registry.getListenerContainer("rx").thread()).isNotSameAs(firstRx);
			DeviceTestSupport.await(TIMEOUT, () -> listeners.rx.get() == 2 * N && listeners.tx.get() == 2 * N,
					"the completions that arrived while stopped");
			exchange(context, 2 * N, N);
			assertThat(listeners.rx.get()).isEqualTo(3 * N);
			assertThat(listeners.tx.get()).isEqualTo(3 * N);
			assertThat(listeners.failed.get()).isZero();
			assertThat(listeners.rxThreads).containsExactly("rdma-poller-rx");
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void throwingListenerDoesNotStopDelivery() {
		listenerRunner(PollingMode.EVENT).run(context -> {
			Listeners listeners = context.getBean(Listeners.class);
			listeners.throwOnOdd = true;
			exchange(context, 0, N);
			exchange(context, N, N);
			assertThat(listeners.rx.get()).isEqualTo(2 * N);
			MeterRegistry registry = context.getBean(MeterRegistry.class);
			DeviceTestSupport.await(TIMEOUT, () -> {
				var c = registry.find("rdma.listener.failures")
					.tag("queue", "rx")
					.tag("exception", "IllegalStateException")
					.counter();
				return c != null && c.count() == N;
			}, "N listener failures counted");
			assertThat(registry.get("rdma.listener")
				.tag("queue", "rx")
				.tag("result", "failure")
				.tag("exception", "IllegalStateException")
				.timer()
				.count()).isPositive();
		});
	}

	@Test
	void shutdownWithUnackedEventsFinishesQuickly() {
		long open = NativeObjects.open();
		long[] closeMillis = new long[1];
		listenerRunner(PollingMode.EVENT, "rdma.completion-queues.rx.ack-batch=100000",
				"rdma.completion-queues.tx.ack-batch=100000")
			.run(context -> {
				for (int round = 0; round < 4; round++) {
					exchange(context, round * 8, 8);
				}
				CompletionQueue rx = context.getBean("rx", CompletionQueue.class);
				CompletionQueue tx = context.getBean("tx", CompletionQueue.class);
				assertThat(rx.eventsUnacked() + tx.eventsUnacked()).isPositive();
				long start = System.nanoTime();
				context.getSourceApplicationContext().close();
				closeMillis[0] = (System.nanoTime() - start) / 1_000_000;
				assertThat(rx.isClosed()).isTrue();
				assertThat(rx.eventsUnacked()).isZero();
				assertThat(tx.eventsUnacked()).isZero();
			});
		assertThat(closeMillis[0]).isLessThan(5000);
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	// ------------------------------------------------------------------ health

	@Configuration(proxyBeanMethods = false)
	static class OverrunApp {

		@Bean
		MeterRegistry meterRegistry() {
			return new SimpleMeterRegistry();
		}

		@Bean
		Loopback loopback(@Qualifier("nic0") Context nic0, @Qualifier("tiny") CompletionQueue tiny,
				@Qualifier("rxq") CompletionQueue rxq) {
			return new Loopback(nic0, tiny, rxq, 64, 64);
		}

	}

	@Test
	void healthIsUpThenDownAfterCqOverrun() {
		long open = NativeObjects.open();
		runner().withUserConfiguration(OverrunApp.class)
			.withPropertyValues("rdma.completion-queues.tiny.type=legacy", "rdma.completion-queues.tiny.entries=1",
					"rdma.completion-queues.rxq.type=legacy", "rdma.completion-queues.rxq.entries=256")
			.run(context -> {
				assertThat(context).hasNotFailed();
				RdmaHealthIndicator health = context.getBean(RdmaHealthIndicator.class);
				assertThat(health.health().getStatus()).isEqualTo(Status.UP);
				CompletionQueue tiny = context.getBean("tiny", CompletionQueue.class);
				Loopback loopback = context.getBean(Loopback.class);
				assertThat(tiny.cqe()).as("tiny CQ size").isLessThan(32);
				int sends = tiny.cqe() + 8;
				for (int i = 0; i < sends; i++) {
					loopback.postRecv(i, i);
				}
				for (int i = 0; i < sends; i++) {
					loopback.postSend(i, i, 8, null);
				}
				RdmaAsyncEventMonitor monitor = context.getBean(RdmaAsyncEventMonitor.class);
				// the binding counts the CQ error on the CQ, then the monitor thread
				// records it: wait for both
				DeviceTestSupport.await(TIMEOUT, () -> tiny.asyncErrors() > 0 && monitor.events("nic0").cqErrors() > 0,
						"IBV_EVENT_CQ_ERR on the tiny CQ, recorded by the async-event thread");
				var result = health.health();
				assertThat(result.getStatus()).isEqualTo(Status.DOWN);
				assertThat(result.getDetails().get("completionQueues").toString()).contains("tiny")
					.contains("cqErrors=");
				MeterRegistry registry = context.getBean(MeterRegistry.class);
				assertThat(registry.get("rdma.cq.errors").tag("queue", "tiny").functionCounter().count()).isPositive();
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	// ------------------------------------------------------------------ startup failing
	// half way

	@Test
	void entriesAboveMaxCqeFailsAndClosesWhatWasCreated() {
		long open = NativeObjects.open();
		runner()
			.withPropertyValues("rdma.channels.events0.device=nic0", "rdma.completion-queues.ok.entries=16",
					"rdma.completion-queues.ok.channel=events0", "rdma.completion-queues.rx.entries=100000000")
			.run(context -> {
				assertThat(context).hasFailed();
				assertThat(StartupFailures.messages(context.getStartupFailure())).containsPattern(
						"rdma.completion-queues.rx.entries=100000000 exceeds max_cqe \\d+ of device " + device);
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void compVectorOutOfRangeFails() {
		long open = NativeObjects.open();
		runner().withPropertyValues("rdma.completion-queues.rx.comp-vector=4096").run(context -> {
			assertThat(context).hasFailed();
			assertThat(StartupFailures.messages(context.getStartupFailure()))
				.contains("rdma.completion-queues.rx.comp-vector=4096 is not below num_comp_vectors");
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void unknownDeviceNameFails() {
		long open = NativeObjects.open();
		runner().withPropertyValues("rdma.devices.nic0.name=nosuchdev0").run(context -> {
			assertThat(context).hasFailed();
			assertThat(StartupFailures.messages(context.getStartupFailure()))
				.contains("rdma.devices.nic0.name=nosuchdev0 matches no RDMA device (devices: [" + device);
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void portBeyondTheDevicesPortsFails() {
		long open = NativeObjects.open();
		runner().withPropertyValues("rdma.devices.nic0.port=9").run(context -> {
			assertThat(context).hasFailed();
			assertThat(StartupFailures.messages(context.getStartupFailure()))
				.contains("rdma.devices.nic0.port=9 exceeds the");
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

}
