package dev.rdma.spring.boot.autoconfigure;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.ListenerInvoker;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A completion event that never reaches the poller (issue 30): a provider can lose one,
 * and then, without a re-poll, the completion waits for the queue's next event, which in
 * a request/response protocol never comes. The test takes the event itself, which is
 * exactly what the poller sees of a lost event: completions on an armed queue and a
 * channel with nothing to read.
 *
 * <p>
 * Two queues share one channel and the one thread of poller group {@code conns}. The
 * listener of {@code q0} holds that thread; meanwhile a message completes on the armed
 * {@code q1}, and the test gets the event of {@code q1} from the channel before the
 * thread can. Once released, the thread must deliver both completions of {@code q1}
 * anyway (its periodic re-poll of armed queues), count the lost event in
 * {@code rdma.events.missed}, and keep delivering: {@code q1} is armed again, so the next
 * message comes through its event.
 */
@Tag(DeviceTestSupport.TAG)
class LostCompletionEventDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(30);

	static final class Listener {

		final AtomicInteger count = new AtomicInteger();

		final CountDownLatch holding = new CountDownLatch(1);

		final CountDownLatch release = new CountDownLatch(1);

		volatile boolean hold;

		void onCompletion(WorkCompletion wc) throws InterruptedException {
			assertThat(wc.isSuccess()).as("completion %s", wc.wrId()).isTrue();
			count.incrementAndGet();
			if (hold) {
				hold = false;
				holding.countDown();
				assertThat(release.await(60, TimeUnit.SECONDS)).as("released").isTrue();
			}
		}

	}

	private static final Method ON_COMPLETION;

	static {
		try {
			ON_COMPLETION = Listener.class.getDeclaredMethod("onCompletion", WorkCompletion.class);
		}
		catch (NoSuchMethodException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	@Test
	void aCompletionWhoseEventIsLostIsDeliveredByTheRepollAndCounted() {
		long open = NativeObjects.open();
		PollerGroupDeviceTest.runner(2, 1, "threads=1", "mode=event").run(context -> {
			assertThat(context).hasNotFailed();
			RdmaListenerEndpointRegistry registry = context.getBean(RdmaListenerEndpointRegistry.class);
			RdmaListenerContainerFactory factory = context.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME,
					RdmaListenerContainerFactory.class);
			Listener holder = new Listener();
			Listener victim = new Listener();
			holder.hold = true;
			for (String queue : new String[] { "q0", "q1" }) {
				Listener l = queue.equals("q0") ? holder : victim;
				ListenerInvoker invoker = argument -> {
					l.onCompletion((WorkCompletion) argument);
				};
				registry.registerListenerContainer(new RdmaListenerEndpoint("listener of " + queue, "test",
						ON_COMPLETION, queue, false, null, invoker), factory);
				registry.getListenerContainer(queue).start();
			}
			PollerGroupDeviceTest.Loopbacks loopbacks = context.getBean(PollerGroupDeviceTest.Loopbacks.class);
			LoopbackQueuePair qp0 = loopbacks.byQueue.get("q0");
			LoopbackQueuePair qp1 = loopbacks.byQueue.get("q1");
			CompletionChannel channel = context.getBean("ev0", CompletionChannel.class);
			CompletionQueue q1 = context.getBean("q1", CompletionQueue.class);
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			// 0. a first message on q1 comes through its event; the thread arms q1 again
			// in the same turn, before it can get to any later event
			qp1.postRecv(1, 0);
			qp1.postSend(2, 0, 32, null);
			DeviceTestSupport.await(TIMEOUT, () -> victim.count.get() == 2, "q1's first two completions");
			// 1. hold the thread in q0's listener: q1 stays armed meanwhile
			qp0.postRecv(1, 0);
			qp0.postSend(2, 0, 32, null);
			assertThat(holder.holding.await(TIMEOUT.toSeconds(), TimeUnit.SECONDS)).as("q0's listener holds the thread")
				.isTrue();
			// 2. a message completes on the armed q1; its one event is taken here, as a
			// provider that lost it would
			long eventsBefore = q1.eventsGot();
			qp1.postRecv(3, 1);
			qp1.postSend(4, 1, 32, null);
			CompletionQueue fired = channel.getEvent(TIMEOUT, null);
			assertThat(fired).as("the event of q1, taken before its poller could").isSameAs(q1);
			assertThat(q1.eventsGot()).isEqualTo(eventsBefore + 1);
			// 3. release the thread: the re-poll of the armed q1 finds both completions
			long released = System.nanoTime();
			holder.release.countDown();
			DeviceTestSupport.await(TIMEOUT, () -> victim.count.get() == 4,
					"the two completions of q1 whose event the poller never saw");
			long latencyMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
			System.out.printf("LOST-EVENT q1's completions delivered %d ms after the thread was released%n", latencyMs);
			DeviceTestSupport.await(Duration.ofSeconds(10),
					() -> meters.get("rdma.events.missed").tag("queue", "q1").counter().count() == 1.0,
					"rdma.events.missed of q1 at 1");
			assertThat(meters.get("rdma.events.missed").tag("queue", "q0").counter().count()).isZero();
			// 4. q1 is armed again: the next message comes through its event
			long eventsNow = q1.eventsGot();
			qp1.postRecv(5, 2);
			qp1.postSend(6, 2, 32, null);
			DeviceTestSupport.await(TIMEOUT, () -> victim.count.get() == 6, "q1's next two completions");
			DeviceTestSupport.await(Duration.ofSeconds(10), () -> q1.eventsGot() > eventsNow,
					"an event of q1 for its next message");
			assertThat(holder.count.get()).isEqualTo(2);
		});
		assertThat(NativeObjects.open()).as("native objects open: " + NativeObjects.openByType()).isEqualTo(open);
	}

}
