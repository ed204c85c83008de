package dev.rdma.spring.boot.autoconfigure;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.ListenerInvoker;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Poller groups on a real device (rxe0 in the test VM): many completion queues, each fed
 * by its own loopback QP (the queue is the QP's send and receive CQ), on a group of a few
 * threads. Sends carry even wr_ids, receives odd ones, each counting up per queue, so a
 * listener can check that it sees every completion once and in the queue's order.
 */
@Tag(DeviceTestSupport.TAG)
class PollerGroupDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(120);

	private static final int DEPTH = 64;

	private static String device;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
	}

	/** The device the runner configures (also for other classes' tests). */
	private static String deviceName() {
		if (device == null) {
			device = DeviceTestSupport.deviceName();
		}
		return device;
	}

	/**
	 * {@code queues} legacy queues {@code q0..}, on {@code channels} channels (queue i on
	 * channel i mod channels), in poller group {@code conns}.
	 */
	static ApplicationContextRunner runner(int queues, int channels, String... group) {
		List<String> properties = new ArrayList<>(
				List.of("rdma.required=true", "rdma.devices.nic0.name=" + deviceName(), "rdma.shutdown-timeout=5s"));
		for (int c = 0; c < channels; c++) {
			properties.add("rdma.channels.ev" + c + ".device=nic0");
		}
		for (int q = 0; q < queues; q++) {
			properties.add("rdma.completion-queues.q" + q + ".entries=" + (4 * DEPTH));
			properties.add("rdma.completion-queues.q" + q + ".channel=ev" + (q % channels));
			properties.add("rdma.completion-queues.q" + q + ".poller=conns");
		}
		for (String g : group) {
			properties.add("rdma.pollers.conns." + g);
		}
		return new ApplicationContextRunner().withConfiguration(RdmaAutoConfigurations.all())
			.withUserConfiguration(App.class)
			.withPropertyValues(properties.toArray(String[]::new));
	}

	@Configuration(proxyBeanMethods = false)
	static class App {

		@Bean
		MeterRegistry meterRegistry() {
			return new SimpleMeterRegistry();
		}

		/**
		 * One loopback QP per queue; a bean that depends on every queue, so it is closed
		 * before them.
		 */
		@Bean
		Loopbacks loopbacks(@Qualifier("nic0") Context nic0, Map<String, CompletionQueue> queues) {
			return new Loopbacks(nic0, queues);
		}

	}

	static final class Loopbacks implements DisposableBean {

		final Map<String, LoopbackQueuePair> byQueue = new LinkedHashMap<>();

		Loopbacks(Context nic0, Map<String, CompletionQueue> queues) {
			try {
				queues.forEach((name, cq) -> byQueue.put(name, new LoopbackQueuePair(nic0, cq, cq, DEPTH, 64)));
			}
			catch (RuntimeException ex) {
				destroy();
				throw ex;
			}
		}

		@Override
		public void destroy() {
			byQueue.values().forEach(LoopbackQueuePair::close);
		}

	}

	/** What one queue's listener saw. */
	static final class Seen {

		final String queue;

		final AtomicLong nextSend = new AtomicLong(0);

		final AtomicLong nextRecv = new AtomicLong(1);

		final AtomicInteger count = new AtomicInteger();

		final Set<String> threads = ConcurrentHashMap.newKeySet();

		final AtomicReference<String> violation = new AtomicReference<>();

		volatile boolean throwing;

		volatile long sleepNanos;

		Seen(String queue) {
			this.queue = queue;
		}

		void onCompletion(WorkCompletion wc) {
			threads.add(Thread.currentThread().getName());
			long id = wc.wrId();
			if (!wc.isSuccess()) {
				violation.compareAndSet(null, queue + ": wr_id " + id + " failed: " + wc.status());
			}
			AtomicLong next = (id & 1) == 0 ? nextSend : nextRecv;
			long expected = next.get();
			if (id != expected) {
				violation.compareAndSet(null, queue + ": wr_id " + id + " where " + expected + " was due");
			}
			next.set(id + 2);
			count.incrementAndGet();
			if (sleepNanos > 0) {
				long end = System.nanoTime() + sleepNanos;
				while (System.nanoTime() < end) {
					Thread.onSpinWait();
				}
			}
			if (throwing) {
				throw new IllegalStateException("listener of " + queue + " fails on purpose");
			}
		}

	}

	private static final Method LISTENER_METHOD;

	static {
		try {
			LISTENER_METHOD = Seen.class.getDeclaredMethod("onCompletion", WorkCompletion.class);
		}
		catch (NoSuchMethodException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	/** Registers and starts a listener on every queue, as the annotation would. */
	private static Map<String, Seen> listen(AssertableApplicationContext context) {
		RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
		RdmaListenerContainerFactory factory = context.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME,
				RdmaListenerContainerFactory.class);
		Map<String, Seen> seen = new LinkedHashMap<>();
		for (String queue : context.getBean(Loopbacks.class).byQueue.keySet()) {
			Seen s = new Seen(queue);
			seen.put(queue, s);
			ListenerInvoker invoker = argument -> s.onCompletion((WorkCompletion) argument);
			registry.registerListenerContainer(new RdmaListenerEndpoint("listener of " + queue, "test", LISTENER_METHOD,
					queue, false, null, invoker), factory);
			registry.getListenerContainer(queue).start();
		}
		return seen;
	}

	/**
	 * Posts {@code n} receives and {@code n} sends on every loopback, continuing the
	 * wr_id sequences.
	 */
	private static void post(Loopbacks loopbacks, Map<String, long[]> posted, int n) {
		loopbacks.byQueue.forEach((queue, qp) -> {
			long[] p = posted.computeIfAbsent(queue, k -> new long[1]);
			for (int i = 0; i < n; i++) {
				qp.postRecv(2 * (p[0] + i) + 1, i);
			}
			for (int i = 0; i < n; i++) {
				qp.postSend(2 * (p[0] + i), i, 32, null);
			}
			p[0] += n;
		});
	}

	private static Set<String> pollerThreads() {
		return Thread.getAllStackTraces()
			.keySet()
			.stream()
			.filter(Thread::isAlive)
			.map(Thread::getName)
			.filter(n -> n.startsWith("rdma-poller-"))
			.collect(Collectors.toCollection(TreeSet::new));
	}

	private static void assertClean(Map<String, Seen> seen) {
		seen.values().forEach(s -> assertThat(s.violation.get()).as(s.queue).isNull());
	}

	// ------------------------------------------------------------------ 64 queues, 2
	// threads

	@Test
	void sixtyFourQueuesOnTwoThreadsInEventModeGetEveryCompletionOnceAndInOrder() {
		long open = NativeObjects.open();
		int queues = 64;
		int perRound = 16;
		int rounds = 4;
		Map<String, CompletionQueue> cqs = new LinkedHashMap<>();
		runner(queues, 16, "threads=2", "mode=event").run(context -> {
			assertThat(context).hasNotFailed();
			assertThat(pollerThreads()).as("no queue has joined yet").isEmpty();
			Map<String, Seen> seen = listen(context);
			// the thread count stays at the group size whatever the number of queues
			assertThat(pollerThreads()).containsExactly("rdma-poller-conns-0", "rdma-poller-conns-1");
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			CompletionQueueListenerContainer first = registry.getListenerContainer("q0");
			PollerGroup group = first.getPollerGroup();
			assertThat(group).isNotNull();
			assertThat(group.threads()).hasSize(2);
			assertThat(group.loads()).containsExactly(32, 32);
			assertThat(first.mode()).isEqualTo(PollingMode.EVENT);
			Loopbacks loopbacks = context.getBean(Loopbacks.class);
			loopbacks.byQueue.keySet().forEach(q -> cqs.put(q, context.getBean(q, CompletionQueue.class)));
			Map<String, long[]> posted = new LinkedHashMap<>();
			for (int round = 1; round <= rounds; round++) {
				post(loopbacks, posted, perRound);
				int expected = 2 * perRound * round;
				DeviceTestSupport.await(TIMEOUT, () -> seen.values().stream().allMatch(s -> s.count.get() >= expected),
						"round " + round + ": " + expected + " completions on each of " + queues + " queues");
				assertClean(seen);
			}
			Thread.sleep(200); // nothing more may come
			for (Seen s : seen.values()) {
				assertThat(s.count.get()).as(s.queue).isEqualTo(2 * perRound * rounds);
				assertThat(s.threads).as("%s polled by one thread for life", s.queue).hasSize(1);
				assertThat(s.threads.iterator().next()).startsWith("rdma-poller-conns-");
			}
			assertClean(seen);
			// both threads served queues; queues sharing a channel share a thread
			Set<String> used = seen.values()
				.stream()
				.flatMap(s -> s.threads.stream())
				.collect(Collectors.toCollection(TreeSet::new));
			assertThat(used).containsExactly("rdma-poller-conns-0", "rdma-poller-conns-1");
			for (int q = 16; q < queues; q++) {
				assertThat(seen.get("q" + q).threads).isEqualTo(seen.get("q" + (q % 16)).threads);
			}
			// events were raised and counted per queue
			long events = cqs.values().stream().mapToLong(CompletionQueue::eventsGot).sum();
			assertThat(events).isPositive();
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			for (String q : cqs.keySet()) {
				// a poller meters a batch once its listener calls returned: the last
				// batch's count may still be on its way when the exchange saw it
				// delivered
				Counter counter = meters.get("rdma.completions").tag("queue", q).tag("status", "success").counter();
				DeviceTestSupport.await(Duration.ofSeconds(10), () -> counter.count() >= 2.0 * perRound * rounds,
						q + ": " + 2 * perRound * rounds + " completions metered (metered: " + counter.count() + ")");
				assertThat(counter.count()).as(q).isEqualTo(2.0 * perRound * rounds);
			}
		});
		// closed: every got event was acked before the queues were destroyed
		for (CompletionQueue cq : cqs.values()) {
			assertThat(cq.isClosed()).isTrue();
			assertThat(cq.eventsAcked()).as(cq.toString()).isEqualTo(cq.eventsGot());
		}
		DeviceTestSupport.await(TIMEOUT, () -> pollerThreads().isEmpty(), "the group's threads to end");
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void shutdownUnderTrafficFinishesWithinTheTimeoutWithEveryEventAcked() {
		long open = NativeObjects.open();
		int queues = 64;
		Map<String, CompletionQueue> cqs = new LinkedHashMap<>();
		long[] closeMillis = new long[1];
		AtomicInteger posted = new AtomicInteger();
		runner(queues, 8, "threads=2").run(context -> {
			Map<String, Seen> seen = listen(context);
			Loopbacks loopbacks = context.getBean(Loopbacks.class);
			loopbacks.byQueue.keySet().forEach(q -> cqs.put(q, context.getBean(q, CompletionQueue.class)));
			AtomicBoolean stop = new AtomicBoolean();
			// keeps every QP busy: re-posts as soon as a queue's listener caught up
			Thread traffic = Thread.ofPlatform().name("traffic").start(() -> {
				Map<String, long[]> sent = new LinkedHashMap<>();
				try {
					while (!stop.get()) {
						boolean any = false;
						for (Map.Entry<String, LoopbackQueuePair> e : loopbacks.byQueue.entrySet()) {
							long[] p = sent.computeIfAbsent(e.getKey(), k -> new long[1]);
							if (seen.get(e.getKey()).count.get() >= 2 * p[0] - 8) {
								int n = 4;
								for (int i = 0; i < n; i++) {
									e.getValue().postRecv(2 * (p[0] + i) + 1, i);
								}
								for (int i = 0; i < n; i++) {
									e.getValue().postSend(2 * (p[0] + i), i, 32, null);
								}
								p[0] += n;
								posted.addAndGet(2 * n);
								any = true;
							}
						}
						if (!any) {
							// the VM's few CPUs are the pollers'
							LockSupport.parkNanos(200_000);
						}
					}
				}
				catch (RuntimeException ex) {
					// the QPs were closed under it: traffic ends
				}
			});
			DeviceTestSupport.await(TIMEOUT, () -> posted.get() > 20 * queues, "traffic on every queue");
			// the registry's stop is the first step of the context's close: the pollers
			// leave their threads, every got event acked, within rdma.shutdown-timeout
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			long start = System.nanoTime();
			registry.stop();
			closeMillis[0] = (System.nanoTime() - start) / 1_000_000;
			for (CompletionQueueListenerContainer container : registry.getListenerContainers()) {
				assertThat(container.isRunning()).as(container.queue()).isFalse();
				CompletionQueue cq = container.completionQueue();
				assertThat(cq.eventsAcked()).as("%s acked before its destruction", cq).isEqualTo(cq.eventsGot());
			}
			DeviceTestSupport.await(TIMEOUT, () -> pollerThreads().isEmpty(), "the group's threads to end");
			context.getSourceApplicationContext().close();
			stop.set(true);
			traffic.join(TIMEOUT.toMillis());
			assertClean(seen);
			assertThat(seen.values().stream().mapToInt(s -> s.count.get()).sum()).isPositive();
		});
		assertThat(closeMillis[0]).as("pollers' stop under traffic, ms (rdma.shutdown-timeout=5s)").isLessThan(5_000);
		long events = 0;
		for (CompletionQueue cq : cqs.values()) {
			assertThat(cq.isClosed()).isTrue();
			assertThat(cq.eventsAcked()).as(cq.toString()).isEqualTo(cq.eventsGot());
			events += cq.eventsGot();
		}
		assertThat(events).isPositive();
		DeviceTestSupport.await(TIMEOUT, () -> pollerThreads().isEmpty(), "the group's threads to end");
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	// ------------------------------------------------------------------ every mode

	@ParameterizedTest
	@EnumSource(names = { "BUSY", "EVENT", "ADAPTIVE" }) // backoff: dedicated pollers
															// only
	void eightQueuesOnOneThreadInEveryMode(PollingMode mode) {
		runner(8, 8, "threads=1", "mode=" + mode.name().toLowerCase(java.util.Locale.ROOT), "spin=200us")
			.run(context -> {
				Map<String, Seen> seen = listen(context);
				assertThat(pollerThreads()).containsExactly("rdma-poller-conns-0");
				assertThat(context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainer("q3").mode())
					.isEqualTo(mode);
				Loopbacks loopbacks = context.getBean(Loopbacks.class);
				Map<String, long[]> posted = new LinkedHashMap<>();
				for (int round = 1; round <= 3; round++) {
					post(loopbacks, posted, 16);
					int expected = 32 * round;
					DeviceTestSupport.await(TIMEOUT,
							() -> seen.values().stream().allMatch(s -> s.count.get() >= expected), "round " + round);
					// idle between rounds: event and adaptive mode arm and wait, busy
					// spins
					Thread.sleep(50);
				}
				for (Seen s : seen.values()) {
					assertThat(s.count.get()).as(s.queue).isEqualTo(96);
					assertThat(s.threads).containsExactly("rdma-poller-conns-0");
				}
				assertClean(seen);
			});
	}

	// ------------------------------------------------------------------ one flooded,
	// one trickling

	@Test
	void aTricklingQueueNextToAFloodedOneIsServedWithinABound() {
		// one thread, two queues on two channels; the flooded queue's listener takes 1 ms
		// a
		// completion and its QP is kept full, so its queue never runs dry: without the
		// batch
		// budget the thread would drain it forever
		runner(2, 2, "threads=1", "batch-budget=16").run(context -> {
			Map<String, Seen> seen = listen(context);
			Seen flood = seen.get("q0");
			Seen trickle = seen.get("q1");
			flood.sleepNanos = 1_000_000;
			Loopbacks loopbacks = context.getBean(Loopbacks.class);
			LoopbackQueuePair floodQp = loopbacks.byQueue.get("q0");
			LoopbackQueuePair trickleQp = loopbacks.byQueue.get("q1");
			AtomicBoolean stop = new AtomicBoolean();
			Thread flooder = Thread.ofPlatform().name("flooder").start(() -> {
				long next = 0;
				try {
					while (!stop.get()) {
						// keep up to DEPTH/2 messages outstanding
						if (2 * next - flood.count.get() < DEPTH) {
							floodQp.postRecv(2 * next + 1, (int) (next % (DEPTH / 2)));
							floodQp.postSend(2 * next, (int) (next % (DEPTH / 2)), 32, null);
							next++;
						}
						else {
							LockSupport.parkNanos(100_000);
						}
					}
				}
				catch (RuntimeException ex) {
					// closed under it
				}
			});
			try {
				DeviceTestSupport.await(TIMEOUT, () -> flood.count.get() > 2 * DEPTH, "the flood to run");
				long worst = 0;
				for (int i = 0; i < 10; i++) {
					int before = trickle.count.get();
					long start = System.nanoTime();
					trickleQp.postRecv(2L * i + 1, 0);
					trickleQp.postSend(2L * i, 0, 32, null);
					DeviceTestSupport.await(TIMEOUT, () -> trickle.count.get() >= before + 2, "trickle message " + i);
					worst = Math.max(worst, System.nanoTime() - start);
					Thread.sleep(20);
				}
				assertThat(flood.threads).isEqualTo(trickle.threads).containsExactly("rdma-poller-conns-0");
				assertThat(worst / 1_000_000).as("worst trickle latency next to the flood, ms").isLessThan(3_000);
				assertClean(seen);
			}
			finally {
				stop.set(true);
				flooder.join(TIMEOUT.toMillis());
			}
		});
	}

	// ------------------------------------------------------------------ a throwing
	// listener

	@Test
	void aThrowingListenerAffectsOnlyItsQueue() {
		runner(4, 2, "threads=1").run(context -> {
			Map<String, Seen> seen = listen(context);
			seen.get("q2").throwing = true;
			Loopbacks loopbacks = context.getBean(Loopbacks.class);
			Map<String, long[]> posted = new LinkedHashMap<>();
			for (int round = 1; round <= 3; round++) {
				post(loopbacks, posted, 16);
				int expected = 32 * round;
				DeviceTestSupport.await(TIMEOUT, () -> seen.values().stream().allMatch(s -> s.count.get() >= expected),
						"round " + round);
			}
			Thread.sleep(100);
			for (Seen s : seen.values()) {
				assertThat(s.count.get()).as(s.queue).isEqualTo(96);
			}
			assertClean(seen);
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			DeviceTestSupport.await(TIMEOUT, () -> {
				var failures = meters.find("rdma.listener.failures")
					.tag("queue", "q2")
					.tag("exception", "IllegalStateException")
					.counter();
				return failures != null && failures.count() == 96;
			}, "96 listener failures counted on q2");
			for (String q : List.of("q0", "q1", "q3")) {
				var failures = meters.find("rdma.listener.failures")
					.tag("queue", q)
					.tag("exception", "IllegalStateException")
					.counter();
				assertThat(failures == null ? 0 : failures.count()).as(q).isZero();
			}
			assertThat(pollerThreads()).containsExactly("rdma-poller-conns-0");
			assertThat(context.getBean(RdmaListenerEndpointRegistry.class).getListenerContainer("q2").isRunning())
				.isTrue();
		});
	}

}
