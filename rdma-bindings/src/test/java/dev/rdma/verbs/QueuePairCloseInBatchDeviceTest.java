package dev.rdma.verbs;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;
import dev.rdma.verbs.testing.NoNativeLeaks;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code QueuePair.close()} ({@code ibv_destroy_qp}) on a thread inside an iterator batch
 * of the QP's send or receive CQ is refused before any native call: on mlx5 (and efa,
 * irdma, mlx4) the destroy takes the CQ's spinlock, which the provider holds from
 * {@code ibv_start_poll} to {@code ibv_end_poll}, and the thread would spin for ever.
 * rxe's destroy takes no CQ lock, so on rxe the close went through (and the device tier
 * cannot show the hang): these tests assert the refusal, that the QP stays open and
 * usable, that it closes after the batch, and that the refusal is limited to that case.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@ExtendWith(NoNativeLeaks.class)
class QueuePairCloseInBatchDeviceTest {

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	/** One loopback SEND of {@code lb}, wr_id {@code id}, and its receive. */
	private static void send(Loopback lb, long id) {
		lb.postRecv(1000 + id, 0);
		lb.postSend(id, 0, 8, null);
	}

	private static void assertRefusedForItsCq(Throwable e, String direction) {
		assertThat(e).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("ibv_destroy_qp")
			.hasMessageContaining("inside a batch of its " + direction + " CQ")
			.hasMessageContaining("spinlock");
	}

	@Test
	void aQpCloseInsideTheHandlerOfAnExtendedPollOfItsCqIsRefusedAndTheQpStaysUsable() {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(16));
				CompletionQueue legacy = ctx().createCompletionQueue(16, null, 0);
				CompletionQueue other = ctx().createCompletionQueue(16, null, 0);
				WorkCompletionBuffer b = new WorkCompletionBuffer(8);
				Loopback sendsOnCx = new Loopback(ctx(), cx, legacy, 8, 64);
				Loopback receivesOnCx = new Loopback(ctx(), legacy, cx, 8, 64);
				ProtectionDomain pd = ctx().allocateProtectionDomain()) {
			QueuePair elsewhere = pd.createQueuePair(new QueuePair.Attributes(other, other, 4, 4, false));
			send(sendsOnCx, 1);
			List<Long> ids = new ArrayList<>();
			List<Throwable> refused = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				cx.poll(b, wc -> {
					ids.add(wc.wrId());
					// went through on rxe before the refusal
					refused.add(SafetyRegressionDeviceTest.refusal(sendsOnCx.qp()::close));
					refused.add(SafetyRegressionDeviceTest.refusal(receivesOnCx.qp()::close));
					// its PD closes the QP first
					refused.add(SafetyRegressionDeviceTest.refusal(sendsOnCx::close));
					elsewhere.close(); // a QP on another CQ may be closed here
				});
				return !ids.isEmpty();
			}, "the send completion on the extended CQ");
			assertThat(ids).containsExactly(1L);
			assertThat(refused).hasSize(3);
			assertRefusedForItsCq(refused.get(0), "send");
			assertRefusedForItsCq(refused.get(1), "receive");
			assertRefusedForItsCq(refused.get(2), "send");
			assertThat(elsewhere.isClosed()).isTrue();

			// nothing changed: the QPs are open, connected and carry traffic; they close
			// now
			assertThat(sendsOnCx.qp().isClosed()).isFalse();
			assertThat(receivesOnCx.qp().isClosed()).isFalse();
			assertThat(sendsOnCx.qp().state()).isEqualTo(QueuePair.State.RTS);
			send(sendsOnCx, 2);
			assertThat(SafetyRegressionDeviceTest.drain(cx, 1)).containsExactly(2L);
			assertThat(SafetyRegressionDeviceTest.drain(legacy, 2)).containsExactly(1001L, 1002L);
			sendsOnCx.qp().close();
			receivesOnCx.qp().close();
			assertThat(sendsOnCx.qp().isClosed()).isTrue();
			assertThat(receivesOnCx.qp().isClosed()).isTrue();
		}
	}

	@Test
	void aQpCloseBetweenStartPollAndEndPollIsRefusedAlsoAfterTheLastNextPoll() {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(16));
				CompletionQueue legacy = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), cx, legacy, 8, 64)) {
			send(lb, 1);
			List<Long> ids = new ArrayList<>();
			List<Throwable> refused = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				if (!cx.startPoll()) {
					return false;
				}
				try {
					ids.add(cx.current().wrId());
					// went through on rxe before the refusal
					refused.add(SafetyRegressionDeviceTest.refusal(lb.qp()::close));
					while (cx.nextPoll()) {
						ids.add(cx.current().wrId());
					}
					// no current completion, but the batch (and the provider's lock) is
					// still open
					refused.add(SafetyRegressionDeviceTest.refusal(lb.qp()::close));
				}
				finally {
					cx.endPoll();
				}
				return true;
			}, "a batch on the extended CQ");
			assertThat(ids).containsExactly(1L);
			assertThat(refused).hasSize(2).allSatisfy(e -> assertRefusedForItsCq(e, "send"));
			assertThat(lb.qp().isClosed()).isFalse();
			assertThat(SafetyRegressionDeviceTest.drain(legacy, 1)).containsExactly(1001L);

			lb.qp().close(); // after endPoll() it closes
			assertThat(lb.qp().isClosed()).isTrue();
		}
	}

	@Test
	void aQpCloseInsideTheHandlerOfALegacyPollIsAllowed() {
		try (CompletionQueue sendCq = ctx().createCompletionQueue(16, null, 0);
				CompletionQueue recvCq = ctx().createCompletionQueue(16, null, 0);
				WorkCompletionBuffer b = new WorkCompletionBuffer(8);
				Loopback lb = new Loopback(ctx(), sendCq, recvCq, 8, 64)) {
			send(lb, 1);
			assertThat(SafetyRegressionDeviceTest.drain(recvCq, 1)).containsExactly(1001L);
			List<Long> ids = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				sendCq.poll(b, wc -> {
					ids.add(wc.wrId());
					// ibv_poll_cq released the CQ's lock before the handler
					lb.qp().close();
				});
				return !ids.isEmpty();
			}, "the send completion on the legacy CQ");
			assertThat(ids).containsExactly(1L);
			assertThat(lb.qp().isClosed()).isTrue();
		}
	}

	@Test
	void aQpCloseOnAnotherThreadThanTheBatchIsNotRefused() throws Exception {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(16));
				CompletionQueue legacy = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), cx, legacy, 8, 64)) {
			send(lb, 1);
			CountDownLatch inBatch = new CountDownLatch(1);
			CountDownLatch closed = new CountDownLatch(1);
			AtomicReference<Throwable> pollerFailure = new AtomicReference<>();
			Thread poller = Thread.ofPlatform().name("batch-holder").start(() -> {
				try {
					DeviceTestSupport.await(Duration.ofSeconds(20), cx::startPoll, "a batch");
					try {
						inBatch.countDown();
						// on mlx5 the close below waits for end_poll: end the batch
						// after 2 s at most
						closed.await(2, TimeUnit.SECONDS);
					}
					finally {
						cx.endPoll();
					}
				}
				catch (Throwable t) {
					pollerFailure.set(t);
				}
			});
			assertThat(inBatch.await(20, TimeUnit.SECONDS)).as("the other thread started a batch").isTrue();
			lb.qp().close(); // this thread holds no batch: not refused
			closed.countDown();
			poller.join(20_000);
			assertThat(poller.isAlive()).isFalse();
			assertThat(pollerFailure.get()).isNull();
			assertThat(lb.qp().isClosed()).isTrue();
		}
	}

	/**
	 * A {@code SINGLE_THREADED} CQ lets the provider skip its CQ lock, which on mlx5 and
	 * efa is what makes another thread's {@code ibv_destroy_qp} wait for an open batch
	 * (otherwise it cleans the CQ, or frees the QP, under the iterator). The binding
	 * makes that close wait in the CQ's exclusive slot instead. On rxe the destroy took
	 * no lock and returned at once (this test failed: "expected false").
	 */
	@Test
	void aQpCloseOnAnotherThreadWaitsForTheBatchOfASingleThreadedCq() throws Exception {
		try (ExtendedCompletionQueue cx = ctx()
			.createExtendedCompletionQueue(CqInitAttributes.of(16).withFlags(EnumSet.of(CqCreateFlag.SINGLE_THREADED)));
				CompletionQueue legacy = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), cx, legacy, 8, 64)) {
			send(lb, 1);
			CountDownLatch closed = new CountDownLatch(1);
			AtomicReference<Throwable> closerFailure = new AtomicReference<>();
			Thread closer;
			DeviceTestSupport.await(Duration.ofSeconds(20), cx::startPoll, "a batch");
			try {
				closer = Thread.ofPlatform().name("other-closer").start(() -> {
					try {
						lb.qp().close();
					}
					catch (Throwable t) {
						closerFailure.set(t);
					}
					finally {
						closed.countDown();
					}
				});
				assertThat(closed.await(500, TimeUnit.MILLISECONDS))
					.as("the other thread's close waits for this batch of the lock-free CQ")
					.isFalse();
				assertThat(lb.qp().isClosed()).isFalse();
				assertThat(cx.current().wrId()).as("the batch still reads its completion").isEqualTo(1L);
				assertThat(cx.nextPoll()).isFalse();
			}
			finally {
				cx.endPoll();
			}
			assertThat(closed.await(10, TimeUnit.SECONDS)).as("the close went on after endPoll()").isTrue();
			closer.join(10_000);
			assertThat(closerFailure.get()).as("the other thread's close").isNull();
			assertThat(lb.qp().isClosed()).isTrue();
			assertThat(SafetyRegressionDeviceTest.drain(legacy, 1)).containsExactly(1001L);
		}
	}

	@Test
	void aQpCloseInsideABatchIsRefusedAtOnceWhileAnotherThreadIsClosingTheQp() throws Exception {
		refusedAtOnceWhileAnotherThreadCloses(false);
	}

	@Test
	void aPdCloseInsideABatchIsRefusedAtOnceWhileAnotherThreadIsClosingThePd() throws Exception {
		refusedAtOnceWhileAnotherThreadCloses(true);
	}

	/**
	 * This thread in a batch of the QP's send CQ closes the QP (or its PD) while another
	 * thread is closing the same object: refused at once, not after waiting for the other
	 * close, which on mlx5 spins in ibv_destroy_qp for the CQ lock of this thread's batch
	 * (a freeze of both threads). Here a call in flight on the QP keeps the other close
	 * waiting with the QP's (and the PD's) close lock held instead.
	 */
	private static void refusedAtOnceWhileAnotherThreadCloses(boolean pd) throws Exception {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(16));
				CompletionQueue legacy = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), cx, legacy, 8, 64)) {
			send(lb, 1);
			QueuePair qp = lb.qp();
			Runnable close = pd ? lb::close : qp::close;
			AtomicReference<Throwable> closerFailure = new AtomicReference<>();
			Thread closer;
			long refusedAfterNanos;
			Throwable refused;
			qp.acquire();
			try {
				closer = Thread.ofPlatform().name("other-closer").start(() -> {
					try {
						close.run();
					}
					catch (Throwable t) {
						closerFailure.set(t);
					}
				});
				DeviceTestSupport.await(Duration.ofSeconds(20), qp::closing, "the other thread's close");
				DeviceTestSupport.await(Duration.ofSeconds(20), cx::startPoll, "a batch");
				try {
					long start = System.nanoTime();
					// waited for the other close first
					refused = SafetyRegressionDeviceTest.refusal(close);
					refusedAfterNanos = System.nanoTime() - start;
				}
				finally {
					cx.endPoll();
				}
			}
			finally {
				qp.release();
			}
			closer.join(20_000);
			assertThat(closer.isAlive()).isFalse();
			assertRefusedForItsCq(refused, "send");
			assertThat(refusedAfterNanos).as("refused at once, without waiting for the other thread's close")
				.isLessThan(TimeUnit.SECONDS.toNanos(2));
			assertThat(closerFailure.get()).as("the other thread's close").isNull();
			assertThat(qp.isClosed()).isTrue();
		}
	}

}
