package dev.rdma.verbs;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * One regression test per defect of issue 12 ("no sequence of public API calls crashes or
 * freezes the JVM"), on a real device. Each failed on 5226d7c: a poll into a closed
 * buffer wrote into freed memory or lost a completion, a nested or concurrent use of an
 * extended CQ froze the whole JVM (a spin on the provider's CQ lock inside a critical
 * downcall, which no safepoint can interrupt: the run then ends at the VM's time limit),
 * a refused close left a channel whose waits returned at once, the raw iterator handed
 * out phantom completions on rdma-core 44's rxe.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SafetyRegressionDeviceTest {

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	/**
	 * Posts {@code n} signaled sends (wr_id 0..n-1) and their receives, and waits for the
	 * send CQ's first event.
	 */
	private static void sendAndAwaitEvent(Loopback lb, CompletionQueue sendCq, int n) {
		sendCq.requestNotify(false);
		for (int i = 0; i < n; i++) {
			lb.postRecv(100 + i, i);
			lb.postSend(i, i, 8, null);
		}
		assertThat(sendCq.channel().getEvent(Duration.ofSeconds(20), null)).as("an event of the send CQ")
			.isSameAs(sendCq);
		sendCq.ackEvents();
	}

	/**
	 * Polls {@code cq} with a fresh buffer until {@code n} completions arrived (20 s at
	 * most) and asserts that no more are queued; their wr_ids.
	 */
	static List<Long> drain(CompletionQueue cq, int n) {
		List<Long> ids = new ArrayList<>();
		try (WorkCompletionBuffer b = new WorkCompletionBuffer(16)) {
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				cq.poll(b, wc -> ids.add(wc.wrId()));
				return ids.size() >= n;
			}, n + " completions");
			assertThat(cq.poll(b)).as("nothing more").isZero();
		}
		return ids;
	}

	@Test
	void aLegacyPollIntoAClosedBufferIsRefusedBeforeAnythingIsTaken() {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				CompletionQueue send = ctx().createCompletionQueue(16, ch, 0);
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), send, recv, 8, 64)) {
			sendAndAwaitEvent(lb, send, 2);
			WorkCompletionBuffer closed = new WorkCompletionBuffer(8);
			closed.close();
			assertThatThrownBy(() -> send.poll(closed)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("closed");
			assertThatThrownBy(() -> send.poll(closed, wc -> {
			})).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
			assertThatThrownBy(() -> send.pollCq(closed)).isInstanceOf(IllegalStateException.class);
			assertThat(drain(send, 2)).as("both completions still on the CQ").containsExactly(0L, 1L);
			assertThat(drain(recv, 2)).containsExactly(100L, 101L);
		}
	}

	@Test
	void aLegacyHandlerThatThrowsLosesNoCompletionOfItsBatch() throws InterruptedException {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				CompletionQueue send = ctx().createCompletionQueue(16, ch, 0);
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), send, recv, 8, 64);
				WorkCompletionBuffer b = new WorkCompletionBuffer(8)) {
			sendAndAwaitEvent(lb, send, 3);
			assertThat(drain(recv, 3)).containsExactly(100L, 101L, 102L);
			Thread.sleep(200); // the three send completions follow their receives
			List<Long> seen = new ArrayList<>();
			int[] taken = new int[1];
			Throwable thrown = refusal(() -> taken[0] = send.poll(b, wc -> {
				seen.add(wc.wrId());
				if (seen.size() == 1) {
					throw new IllegalArgumentException("listener failed on the first");
				}
			}));
			assertThat(thrown).hasMessage("listener failed on the first");
			assertThat(seen).as("every completion the throwing poll took reached the handler").hasSizeGreaterThan(1);
			seen.addAll(drain(send, 3 - seen.size()));
			assertThat(seen).as("none lost, none twice").containsExactly(0L, 1L, 2L);
		}
	}

	@Test
	void anExtendedPollIntoAClosedBufferLosesNoCompletion() {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				ExtendedCompletionQueue send = ctx()
					.createExtendedCompletionQueue(CqInitAttributes.of(16).withChannel(ch));
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), send, recv, 8, 64)) {
			sendAndAwaitEvent(lb, send, 1);
			WorkCompletionBuffer closed = new WorkCompletionBuffer(8);
			closed.close();
			assertThatThrownBy(() -> send.poll(closed)).isInstanceOf(IllegalStateException.class);
			assertThatThrownBy(() -> send.poll(closed, wc -> {
			})).isInstanceOf(IllegalStateException.class);
			assertThat(drain(send, 1)).as("the completion is still on the CQ").containsExactly(0L);
			drain(recv, 1);
		}
	}

	@Test
	void nestedUseOfAnExtendedCqIsRefusedInsteadOfFreezingTheJvm() {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				ExtendedCompletionQueue cx = ctx()
					.createExtendedCompletionQueue(CqInitAttributes.of(16).withChannel(ch));
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				CompletionQueue other = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), cx, recv, 8, 64);
				WorkCompletionBuffer b = new WorkCompletionBuffer(8);
				WorkCompletionBuffer b2 = new WorkCompletionBuffer(8)) {
			sendAndAwaitEvent(lb, cx, 3);
			List<Throwable> refused = new ArrayList<>();
			List<Long> ids = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				cx.poll(b, wc -> {
					ids.add(wc.wrId());
					refused.add(refusal(() -> cx.poll(b2))); // froze the JVM on 5226d7c
					refused.add(refusal(() -> cx.poll(b2, w -> {
					})));
					refused.add(refusal(() -> cx.pollCq(b2)));
					refused.add(refusal(() -> cx.resize(64))); // hung the thread
					refused.add(refusal(cx::startPoll));
					refused.add(refusal(cx::endPoll));
					refused.add(refusal(cx::close));
					refused.add(refusal(() -> other.poll(b))); // b is being filled by
																// this poll
					assertThat(other.poll(b2)).as("another CQ may be polled from the handler").isZero();
				});
				return ids.size() >= 3;
			}, "3 completions");
			assertThat(ids).containsExactly(0L, 1L, 2L);
			assertThat(refused).hasSize(3 * 8).allSatisfy(e -> assertThat(e).isInstanceOf(IllegalStateException.class));
			assertThat(refused.getFirst()).hasMessageContaining("from inside its own poll");

			// the same between startPoll() and endPoll() of the raw iterator
			for (int i = 0; i < 2; i++) {
				lb.postRecv(200 + i, i);
				lb.postSend(10 + i, i, 8, null);
			}
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				if (!cx.startPoll()) {
					return false;
				}
				try {
					ids.add(cx.current().wrId());
					assertThat(refusal(() -> cx.poll(b2))).isInstanceOf(IllegalStateException.class);
					assertThat(refusal(() -> cx.resize(64))).isInstanceOf(IllegalStateException.class);
					assertThat(refusal(cx::startPoll)).isInstanceOf(IllegalStateException.class);
				}
				finally {
					cx.endPoll();
				}
				return ids.size() >= 5;
			}, "2 more completions");
			assertThat(ids).containsExactly(0L, 1L, 2L, 10L, 11L);
			cx.resize(64); // outside the poll it works
			assertThat(cx.cqe()).isGreaterThanOrEqualTo(64);
			drain(recv, 5);
		}
	}

	/** What {@code r} threw; fails when it returned normally. */
	static Throwable refusal(Runnable r) {
		return DeviceTestSupport.thrown(RuntimeException.class, r);
	}

	@Test
	void twoThreadsPollingOneExtendedCqWithGcPressureDeliverEveryCompletionOnce() throws Exception {
		int messages = 640; // 20 rounds of 32 at least
		int minCollections = 20; // and more rounds until 20 full collections ran
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(1024));
				CompletionQueue recv = ctx().createCompletionQueue(1024, null, 0);
				Loopback lb = new Loopback(ctx(), cx, recv, 64, 64)) {
			Set<Long> seen = ConcurrentHashMap.newKeySet();
			AtomicInteger duplicates = new AtomicInteger();
			AtomicBoolean stop = new AtomicBoolean();
			List<Throwable> errors = new CopyOnWriteArrayList<>();
			List<Thread> threads = new ArrayList<>();
			for (int t = 0; t < 2; t++) {
				threads.add(Thread.ofPlatform().name("poller-" + t).start(() -> {
					try (WorkCompletionBuffer b = new WorkCompletionBuffer(8)) {
						while (!stop.get()) {
							cx.poll(b, wc -> {
								byte[] garbage = new byte[4096]; // allocation in the
																	// handler: frequent
																	// safepoints
								garbage[0] = 1;
								if (!seen.add(wc.wrId())) {
									duplicates.incrementAndGet();
								}
							});
						}
					}
					catch (Throwable e) {
						errors.add(e);
					}
				}));
			}
			// Full collections back to back, each followed by a pause as long as it took
			// (at least 2 ms): the pollers are stopped half of the time at most, and the
			// rounds go on until 20 collections ran during them. With a fixed 2 ms pause
			// the collections stopped the pollers nearly all the time: the test's length
			// was that of the collections, 46 s in the lane and over its 120 s timeout
			// with the host at twice the load.
			AtomicInteger collections = new AtomicInteger();
			threads.add(Thread.ofPlatform().name("gc").start(() -> {
				while (!stop.get()) {
					long t0 = System.nanoTime();
					System.gc();
					collections.incrementAndGet();
					try {
						Thread.sleep(Math.max(2, (System.nanoTime() - t0) / 1_000_000));
					}
					catch (InterruptedException e) {
						return;
					}
				}
			}));
			long next = 0;
			try (WorkCompletionBuffer rb = new WorkCompletionBuffer(64)) {
				int received = 0;
				while (next < messages || collections.get() < minCollections) {
					for (int i = 0; i < 32; i++, next++) {
						lb.postRecv(next, i);
						lb.postSend(next, i, 8, null);
					}
					long target = next;
					DeviceTestSupport.await(Duration.ofSeconds(60), () -> seen.size() >= target, target + " sends");
					int want = (int) next;
					int[] got = { received };
					DeviceTestSupport.await(Duration.ofSeconds(60), () -> (got[0] += recv.poll(rb)) >= want,
							"receives");
					received = got[0];
				}
			}
			finally {
				stop.set(true);
				for (Thread t : threads) {
					t.join(20_000);
				}
			}
			assertThat(errors).isEmpty();
			assertThat(duplicates).hasValue(0);
			assertThat(next).isGreaterThanOrEqualTo(messages);
			assertThat(seen).as("every completion once").hasSize((int) next);
			assertThat(collections.get()).as("full collections while the pollers ran")
				.isGreaterThanOrEqualTo(minCollections);
		}
	}

	@Test
	void aRefusedChannelCloseLeavesTheChannelExactlyAsUsable() {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				CompletionQueue send = ctx().createCompletionQueue(16, ch, 0);
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), send, recv, 8, 64);
				Waker waker = new Waker()) {
			VerbsException busy = (VerbsException) refusal(ch::close);
			assertThat(busy.errno()).isEqualTo(Errno.EBUSY);
			assertThat(busy).hasMessageContaining("ibv_destroy_comp_channel");
			assertThat(ch.isClosed()).isFalse();

			long t0 = System.nanoTime();
			assertThat(ch.await(Duration.ofMillis(300), waker)).isEqualTo(CompletionChannel.WaitResult.TIMEOUT);
			assertThat(ch.getEvent(Duration.ofMillis(300), waker)).isNull();
			assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("both waits waited (5226d7c: returned at once)")
				.isGreaterThanOrEqualTo(Duration.ofMillis(500));
			sendAndAwaitEvent(lb, send, 1); // an event still arrives
			drain(send, 1);
			drain(recv, 1);
		}
	}

	/**
	 * A channel's close() racing a CQ create on that channel: the create verb reads
	 * {@code channel->fd} and increments {@code channel->refcnt}, so the channel must
	 * never be destroyed under it. Either the close comes first (the create then fails
	 * with "closed" before any native call) or the close is refused with EBUSY and the CQ
	 * works. Both threads start from a barrier; one of them first busy-waits 0-38 us,
	 * sweeping the offset across the window.
	 */
	@Test
	void aChannelCloseRacingACqCreateNeverFreesTheChannelUnderTheCreate() throws Exception {
		java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
		java.util.Map<String, Integer> outcomes = new java.util.TreeMap<>();
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
		int iterations = 0;
		try (WorkCompletionBuffer b = new WorkCompletionBuffer(4)) {
			for (int i = 0; i < 600 && System.nanoTime() - deadline < 0; i++, iterations++) {
				boolean extended = i % 2 == 1;
				long closeDelay = (i % 80) < 40 ? (i % 20) * 2_000L : 0;
				long createDelay = (i % 80) < 40 ? 0 : (i % 20) * 2_000L;
				CompletionChannel ch = ctx().createCompletionChannel();
				java.util.concurrent.CyclicBarrier barrier = new java.util.concurrent.CyclicBarrier(2);
				java.util.concurrent.Future<CompletionQueue> create = pool.submit(() -> {
					barrier.await(10, TimeUnit.SECONDS);
					spin(createDelay);
					return extended ? ctx().createExtendedCompletionQueue(CqInitAttributes.of(4).withChannel(ch))
							: ctx().createCompletionQueue(4, ch, 0);
				});
				java.util.concurrent.Future<Void> close = pool.submit(() -> {
					barrier.await(10, TimeUnit.SECONDS);
					spin(closeDelay);
					ch.close();
					return null;
				});
				Throwable createError = failure(create);
				Throwable closeError = failure(close);
				String what = "iteration " + i + (extended ? " (extended CQ)" : " (legacy CQ)") + ": create "
						+ (createError == null ? "succeeded" : "failed: " + createError) + ", close "
						+ (closeError == null ? "succeeded" : "failed: " + closeError);
				if (createError == null) {
					CompletionQueue cq = create.get();
					assertThat(closeError).as(what + ": a CQ was created on the channel, so its close must be refused")
						.isInstanceOf(VerbsException.class);
					assertThat(((VerbsException) closeError).errno()).as(what).isEqualTo(Errno.EBUSY);
					assertThat(ch.isClosed()).as(what).isFalse();
					assertThat(ch.completionQueues()).as(what).contains(cq);
					cq.requestNotify(false);
					assertThat(cq.poll(b)).as(what + ": the CQ works").isZero();
					cq.close();
					ch.close();
					outcomes.merge("created, close refused with EBUSY", 1, Integer::sum);
				}
				else {
					assertThat(createError).as(what + ": the create may only be refused before any native call")
						.isInstanceOf(IllegalStateException.class)
						.hasMessageContaining("closed");
					assertThat(closeError).as(what).isNull();
					assertThat(ch.isClosed()).as(what).isTrue();
					outcomes.merge("closed first, create refused", 1, Integer::sum);
				}
			}
		}
		finally {
			pool.shutdownNow();
		}
		System.out.println("channel close racing CQ create, " + iterations + " iterations: " + outcomes);
		assertThat(iterations).as("iterations within 40 s").isGreaterThanOrEqualTo(100);
	}

	/** Busy-waits {@code nanos}. */
	private static void spin(long nanos) {
		long end = System.nanoTime() + nanos;
		while (System.nanoTime() - end < 0) {
			Thread.onSpinWait();
		}
	}

	/** What {@code f} threw, or null (waits at most 20 s). */
	private static Throwable failure(java.util.concurrent.Future<?> f) throws Exception {
		try {
			f.get(20, TimeUnit.SECONDS);
			return null;
		}
		catch (java.util.concurrent.ExecutionException e) {
			return e.getCause();
		}
	}

	@Test
	void aRefusedCqCloseChangesNothingNotEvenTheEventCounts() {
		try (CompletionChannel ch = ctx().createCompletionChannel();
				CompletionQueue send = ctx().createCompletionQueue(16, ch, 0);
				CompletionQueue recv = ctx().createCompletionQueue(16, null, 0);
				Loopback lb = new Loopback(ctx(), send, recv, 8, 64)) {
			send.requestNotify(false);
			lb.postRecv(100, 0);
			lb.postSend(0, 0, 8, null);
			assertThat(ch.getEvent(Duration.ofSeconds(20), null)).isSameAs(send);
			assertThat(send.eventsUnacked()).isEqualTo(1);
			VerbsException busy = (VerbsException) refusal(send::close);
			assertThat(busy.errno()).isEqualTo(Errno.EBUSY);
			assertThat(busy).hasMessageContaining("ibv_destroy_cq").hasMessageContaining("QueuePair");
			assertThat(send.isClosed()).isFalse();
			assertThat(send.eventsUnacked()).as("the refused close acked nothing").isEqualTo(1);
			assertThat(drain(send, 1)).containsExactly(0L);
			drain(recv, 1);
			send.ackEvents();
		}
	}

	@Test
	void theRawIteratorNeverHandsOutAPhantomCompletion() {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(CqInitAttributes.of(32));
				CompletionQueue recv = ctx().createCompletionQueue(32, null, 0);
				Loopback lb = new Loopback(ctx(), cx, recv, 16, 64)) {
			List<Long> ids = new ArrayList<>();
			for (int round = 0; round < 3; round++) {
				for (int i = 0; i < 3; i++) {
					lb.postRecv(100 + i, i);
					lb.postSend(round * 10 + i, i, 8, null);
				}
				int expected = (round + 1) * 3;
				// the documented drain sequence: next_poll until it returns false, then
				// end_poll
				DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
					if (cx.startPoll()) {
						try {
							ids.add(cx.current().wrId());
							while (cx.nextPoll()) {
								ids.add(cx.current().wrId());
							}
						}
						finally {
							cx.endPoll();
						}
					}
					return ids.size() >= expected;
				}, "round " + round);
				for (int i = 0; i < 3; i++) {
					assertThat(cx.startPoll()).as("a drained CQ has nothing (5226d7c: a phantom wr_id 0 and 30 more)")
						.isFalse();
				}
				drain(recv, 3);
			}
			assertThat(ids).containsExactly(0L, 1L, 2L, 10L, 11L, 12L, 20L, 21L, 22L);
		}
	}

	@Test
	void anExtendedCqCanAlsoBePolledWithIbvPollCq() {
		try (ExtendedCompletionQueue cx = ctx().createExtendedCompletionQueue(
				CqInitAttributes.of(32).withWcFlags(Set.of(WcExFlag.BYTE_LEN, WcExFlag.QP_NUM)));
				CompletionQueue recv = ctx().createCompletionQueue(32, null, 0);
				Loopback lb = new Loopback(ctx(), recv, cx, 16, 64);
				WorkCompletionBuffer b = new WorkCompletionBuffer(8)) {
			for (int i = 0; i < 2; i++) {
				lb.postRecv(100 + i, i);
				lb.postSend(i, i, 24, null);
			}
			List<String> seen = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				int n = cx.pollCq(b);
				for (int i = 0; i < n; i++) {
					WorkCompletion wc = b.get(i);
					seen.add(wc.wrId() + ":" + wc.opcode() + ":" + wc.byteLen() + ":" + (wc.qpNum() == lb.qp().qpNum())
							+ ":" + wc.pkeyIndex());
				}
				return seen.size() >= 2;
			}, "2 receives through ibv_poll_cq");
			assertThat(seen).containsExactly("100:RECV:24:true:0", "101:RECV:24:true:0");
			drain(recv, 2);
		}
	}

}
