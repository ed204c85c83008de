package dev.rdma.verbs;

import dev.rdma.verbs.efa.EfaCompletionQueue;
import dev.rdma.verbs.efa.EfaWcFlag;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Every verb of the bindings on a real device (rxe0 in the Soft-RoCE VM). */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BindingsDeviceTest {

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	private static VerbsException verbsError(Runnable r) {
		return DeviceTestSupport.thrown(VerbsException.class, r);
	}

	@Test
	void deviceContextPortAndGid() {
		try (DeviceList list = DeviceList.open()) {
			assertThat(list.devices()).extracting(Device::name).contains(ctx().deviceName());
			assertThat(list.byName(ctx().deviceName()).orElseThrow().guid()).isEqualTo(ctx().guid());
		}
		DeviceAttributes attr = ctx().queryDevice();
		assertThat(attr.maxCqe()).isPositive();
		assertThat(attr.maxCq()).isPositive();
		assertThat(attr.physPortCount()).isGreaterThanOrEqualTo(1);
		assertThat(ctx().numCompVectors()).isPositive();
		PortAttributes port = ctx().queryPort(1);
		assertThat(port.state()).isEqualTo(PortAttributes.PortState.ACTIVE);
		assertThat(port.activeMtu()).isBetween(256, 4096);
		int gidIndex = ctx().findIpv4GidIndex(1);
		assertThat(gidIndex).isNotNegative();
		assertThat(ctx().queryGid(1, gidIndex).isIpv4Mapped()).isTrue();
		assertThatThrownBy(() -> ctx().queryPort(0)).isInstanceOf(IllegalArgumentException.class);
		System.out.printf("device %s: max_cqe %d, num_comp_vectors %d, %s, vendor 0x%x%n", ctx().deviceName(),
				attr.maxCqe(), ctx().numCompVectors(), port, attr.vendorId());
	}

	@Test
	void legacyCqSizeResizeAndDocumentedErrors() {
		int maxCqe = ctx().queryDevice().maxCqe();
		try (CompletionQueue cq = ctx().createCompletionQueue(16, null, 0)) {
			assertThat(cq.cqe()).isGreaterThanOrEqualTo(16);
			cq.resize(128);
			assertThat(cq.cqe()).isGreaterThanOrEqualTo(128);
			cq.resize(4);
			assertThat(cq.cqe()).isBetween(4, 127);
			assertThat(verbsError(() -> cq.resize(maxCqe + 1)).errno()).isEqualTo(Errno.EINVAL);
		}
		VerbsException zero = verbsError(() -> ctx().createCompletionQueue(0, null, 0));
		assertThat(zero.verb()).isEqualTo("ibv_create_cq");
		assertThat(zero.errno()).isEqualTo(Errno.EINVAL);
		assertThat(zero.getMessage()).contains("EINVAL (22): Invalid argument").contains("cqe=0");
		assertThat(verbsError(() -> ctx().createCompletionQueue(maxCqe + 1, null, 0)).errno()).isEqualTo(Errno.EINVAL);
		assertThat(verbsError(() -> ctx().createCompletionQueue(16, null, ctx().numCompVectors())).errno())
			.isEqualTo(Errno.EINVAL);
	}

	@Test
	void extendedCqCreationAndDocumentedErrors() {
		int maxCqe = ctx().queryDevice().maxCqe();
		try (ExtendedCompletionQueue cq = ctx().createExtendedCompletionQueue(
				CqInitAttributes.of(16).withFlags(EnumSet.of(CqCreateFlag.SINGLE_THREADED)))) {
			assertThat(cq.cqe()).isGreaterThanOrEqualTo(16);
			assertThat(cq.provides(WcExFlag.BYTE_LEN)).isTrue();
			cq.resize(64);
			assertThat(cq.cqe()).isGreaterThanOrEqualTo(64);
		}
		VerbsException ts = verbsError(() -> ctx().createExtendedCompletionQueue(
				CqInitAttributes.of(16).withWcFlags(EnumSet.of(WcExFlag.COMPLETION_TIMESTAMP))));
		assertThat(ts.verb()).isEqualTo("ibv_create_cq_ex");
		assertThat(ts.errno()).isEqualTo(Errno.EOPNOTSUPP);
		assertThat(verbsError(() -> ctx().createExtendedCompletionQueue(CqInitAttributes.of(0))).errno())
			.isEqualTo(Errno.EINVAL);
		assertThat(verbsError(() -> ctx().createExtendedCompletionQueue(CqInitAttributes.of(maxCqe + 1))).errno())
			.isEqualTo(Errno.EINVAL);
		assertThat(verbsError(() -> ctx()
			.createExtendedCompletionQueue(CqInitAttributes.of(16).withCompVector(ctx().numCompVectors()))).errno())
			.isEqualTo(Errno.EINVAL);
	}

	@Test
	void parentDomainsAreRefusedByRxeAndAPlainPdIsNeverPassedAsOne() {
		try (ProtectionDomain pd = ctx().allocateProtectionDomain()) {
			assertThat(pd.isParentDomain()).isFalse();
			VerbsException e = verbsError(pd::allocateParentDomain);
			assertThat(e.verb()).isEqualTo("ibv_alloc_parent_domain");
			assertThat(e.errno()).isEqualTo(Errno.EOPNOTSUPP);
			// rxe would accept a plain PD as parent_domain (undefined behaviour): the
			// binding refuses it first
			assertThatThrownBy(() -> CqInitAttributes.of(16).withParentDomain(pd))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("parent domain");
		}
	}

	@Test
	void efadvCreateCqOnANonEfaDeviceIsEopnotsupp() {
		VerbsException e = verbsError(
				() -> EfaCompletionQueue.create(ctx(), CqInitAttributes.of(16), Set.of(EfaWcFlag.SGID)));
		assertThat(e.verb()).isEqualTo("efadv_create_cq");
		assertThat(e.errno()).isEqualTo(Errno.EOPNOTSUPP);
		assertThat(e.errnoText()).isEqualTo("Operation not supported");
	}

	@Test
	void loopbackCompletionsPolledByBothPathsWithEvents() {
		try (CompletionChannel channel = ctx().createCompletionChannel();
				CompletionQueue sendCq = ctx().createCompletionQueue(64, channel, 0);
				ExtendedCompletionQueue recvCq = ctx().createExtendedCompletionQueue(CqInitAttributes.of(64)
					.withChannel(channel)
					.withCompVector(ctx().numCompVectors() - 1)
					.withWcFlags(EnumSet.of(WcExFlag.BYTE_LEN, WcExFlag.IMM, WcExFlag.QP_NUM)));
				Loopback lb = new Loopback(ctx(), sendCq, recvCq, 32, 256);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16);
				Waker waker = new Waker()) {
			assertThat(channel.completionQueues()).containsExactly(sendCq, recvCq);
			sendCq.requestNotify(false);
			recvCq.requestNotify(false);
			for (int i = 0; i < 4; i++) {
				lb.postRecv(1000 + i, i);
			}
			for (int i = 0; i < 4; i++) {
				lb.mr().buffer().set(java.lang.foreign.ValueLayout.JAVA_BYTE, lb.sendOffset(i), (byte) (i + 1));
				lb.postSend(2000 + i, i, 64 + i, i % 2 == 0 ? 0x0A0B0C00 + i : null);
			}
			// both CQs raise one event each through the shared channel
			List<CompletionQueue> fired = new ArrayList<>();
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
			while (fired.size() < 2 && System.nanoTime() < deadline) {
				CompletionQueue q = channel.getEvent(Duration.ofSeconds(1), waker);
				if (q != null) {
					fired.add(q);
				}
			}
			assertThat(fired).containsExactlyInAnyOrder(sendCq, recvCq);
			// nothing pending now (neither CQ is armed): a non-blocking get says so
			// without an error, a get with a
			// timeout times out, and one whose waker was signalled returns at once
			assertThat(channel.getEvent()).isNull();
			assertThat(channel.getEvent(Duration.ofMillis(50), waker)).isNull();
			waker.wake();
			long woken = System.nanoTime();
			assertThat(channel.getEvent(Duration.ofSeconds(30), waker)).isNull();
			assertThat(Duration.ofNanos(System.nanoTime() - woken)).as("get with a signalled waker")
				.isLessThan(Duration.ofSeconds(10));
			assertThat(sendCq.eventsGot()).isEqualTo(1);
			assertThat(recvCq.eventsUnacked()).isEqualTo(1);
			assertThatThrownBy(() -> recvCq.ackEvents(2)).isInstanceOf(IllegalArgumentException.class);
			recvCq.ackEvents(1);
			assertThat(sendCq.ackEvents()).isEqualTo(1);
			assertThat(sendCq.eventsAcked()).isEqualTo(1);

			List<WorkCompletionSnapshot> sends = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				int n = sendCq.poll(buffer);
				for (int i = 0; i < n; i++) {
					sends.add(buffer.get(i).copy());
				}
				return sends.size() == 4;
			}, "4 send completions");
			assertThat(sends).extracting(WorkCompletionSnapshot::wrId).containsExactly(2000L, 2001L, 2002L, 2003L);
			assertThat(sends).allSatisfy(wc -> {
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.opcode()).isEqualTo(WcOpcode.SEND);
				assertThat(wc.qpNum()).isEqualTo(lb.qp().qpNum());
			});

			List<WorkCompletionSnapshot> recvs = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				recvCq.poll(buffer, wc -> {
					assertThat(Thread.currentThread()).isNotNull();
					recvs.add(wc.copy());
				});
				return recvs.size() == 4;
			}, "4 receive completions");
			assertThat(recvs).extracting(WorkCompletionSnapshot::wrId).containsExactly(1000L, 1001L, 1002L, 1003L);
			for (int i = 0; i < 4; i++) {
				WorkCompletionSnapshot wc = recvs.get(i);
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.opcode()).isEqualTo(WcOpcode.RECV);
				assertThat(wc.byteLen()).isEqualTo(64 + i);
				assertThat(wc.qpNum()).isEqualTo(lb.qp().qpNum());
				assertThat(wc.hasFlag(WcFlag.WITH_IMM)).isEqualTo(i % 2 == 0);
				if (i % 2 == 0) {
					assertThat(wc.immData()).isEqualTo(0x0A0B0C00 + i);
				}
				assertThat(lb.mr().buffer().get(java.lang.foreign.ValueLayout.JAVA_BYTE, lb.recvOffset(i)))
					.isEqualTo((byte) (i + 1));
			}
			// a field not requested at creation is refused, never read through a NULL
			// pointer
			lb.postRecv(1004, 4);
			lb.postSend(2004, 4, 8, null);
			List<Throwable> refused = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> recvCq.poll(buffer, wc -> {
				try {
					wc.srcQp();
				}
				catch (IllegalStateException e) {
					refused.add(e);
				}
			}) == 1, "the 5th receive");
			assertThat(refused).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("SRC_QP"));
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> sendCq.poll(buffer) == 1, "the 5th send");
			assertThat(recvCq.poll(buffer)).isZero();
			assertThat(sendCq.poll(buffer)).isZero();
		}
	}

	@Test
	@SuppressWarnings("try") // close() called inside try-with-resources on purpose: it
								// must be idempotent
	void destroyWhileAQpUsesTheCqIsEbusyAndTheCqStaysUsable() {
		try (CompletionChannel channel = ctx().createCompletionChannel();
				CompletionQueue cq = ctx().createCompletionQueue(64, channel, 0);
				Loopback lb = new Loopback(ctx(), cq, cq, 8, 64);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(8)) {
			VerbsException busy = verbsError(cq::close);
			assertThat(busy.verb()).isEqualTo("ibv_destroy_cq");
			assertThat(busy.errno()).isEqualTo(Errno.EBUSY);
			assertThat(cq.isClosed()).isFalse();
			VerbsException channelBusy = verbsError(channel::close);
			assertThat(channelBusy.errno()).isEqualTo(Errno.EBUSY);
			assertThat(channel.isClosed()).isFalse();
			lb.postRecv(1, 0);
			lb.postSend(2, 0, 16, 7);
			List<Long> ids = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				cq.poll(buffer, wc -> ids.add(wc.wrId()));
				return ids.size() == 2;
			}, "completions after EBUSY");
			assertThat(ids).containsExactlyInAnyOrder(1L, 2L);
			lb.close();
			cq.close();
			assertThat(cq.isClosed()).isTrue();
			assertThatThrownBy(() -> cq.poll(buffer)).isInstanceOf(IllegalStateException.class);
			assertThatThrownBy(() -> cq.requestNotify(false)).isInstanceOf(IllegalStateException.class);
		}
	}

	/**
	 * getEvent with a timeout gets events that come after the wait began (a ping-pong)
	 * and events already pending, in any order of the two, and a signalled waker ends the
	 * wait without taking the event that comes later.
	 */
	@ParameterizedTest
	@EnumSource(CompletionChannel.WaitMode.class)
	void getEventWithATimeoutGetsLateAndPendingEventsAlike(CompletionChannel.WaitMode mode) throws Exception {
		try (CompletionChannel channel = ctx().createCompletionChannel(mode);
				CompletionQueue cq = ctx().createCompletionQueue(64, channel, 0);
				Loopback lb = new Loopback(ctx(), cq, cq, 8, 64);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16);
				Waker waker = new Waker()) {
			ScheduledExecutorService later = Executors.newSingleThreadScheduledExecutor();
			try {
				int got = 0;
				for (int round = 0; round < 40; round++) {
					cq.requestNotify(false);
					lb.postRecv(round, 0);
					boolean pending = round % 5 == 4; // mostly late, as in a ping-pong
					if (pending) {
						lb.postSend(1000 + round, 0, 16, null);
						DeviceTestSupport.await(Duration.ofSeconds(20),
								() -> channel.await(Duration.ZERO, null) == CompletionChannel.WaitResult.READY,
								"a pending event");
					}
					else {
						int r = round;
						later.schedule(() -> lb.postSend(1000 + r, 0, 16, null), 20, TimeUnit.MILLISECONDS);
					}
					assertThat(channel.getEvent(Duration.ofSeconds(20), waker))
						.as("event of round %d (%s)", round, pending ? "pending" : "late")
						.isSameAs(cq);
					got++;
					drain(cq, buffer, 2, "the send and the receive of round " + round);
				}
				// a wake-up ends a wait; the event that comes later is got by the next
				// wait
				waker.wake();
				long woken = System.nanoTime();
				assertThat(channel.getEvent(Duration.ofSeconds(30), waker)).isNull();
				assertThat(Duration.ofNanos(System.nanoTime() - woken)).as("get with a signalled waker")
					.isLessThan(Duration.ofSeconds(10));
				cq.requestNotify(false);
				lb.postRecv(99, 0);
				lb.postSend(99, 0, 16, null);
				assertThat(channel.getEvent(Duration.ofSeconds(20), waker)).isSameAs(cq);
				got++;
				drain(cq, buffer, 2, "the send and the receive of round 99");
				// with no time to wait: null when nothing is pending, the event when one
				// is, in any order
				for (int i = 0; i < 20; i++) {
					assertThat(channel.getEvent(Duration.ZERO, null)).as("nothing pending, call %d", i).isNull();
				}
				for (int i = 0; i < 20; i++) {
					cq.requestNotify(false);
					lb.postRecv(200 + i, 0);
					lb.postSend(200 + i, 0, 16, null);
					DeviceTestSupport.await(Duration.ofSeconds(20),
							() -> channel.await(Duration.ZERO, null) == CompletionChannel.WaitResult.READY,
							"a pending event");
					assertThat(channel.getEvent(Duration.ZERO, null)).as("pending event, call %d", i).isSameAs(cq);
					got++;
					drain(cq, buffer, 2, "the send and the receive of call " + i);
					if (i % 3 == 0) {
						assertThat(channel.getEvent(Duration.ZERO, null)).as("nothing pending after call %d", i)
							.isNull();
					}
				}
				assertThat(cq.eventsGot()).isEqualTo(got);
				assertThat(cq.ackEvents()).isEqualTo(got);
			}
			finally {
				later.shutdownNow();
			}
		}
	}

	private static void drain(CompletionQueue cq, WorkCompletionBuffer buffer, int expected, String what) {
		int[] completions = { 0 };
		DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
			completions[0] += cq.poll(buffer);
			return completions[0] == expected;
		}, what);
	}

	@Test
	void closingACqWithGotButUnackedEventsAcksThemAndNeverHangs() throws Exception {
		CompletionChannel channel = ctx().createCompletionChannel();
		CompletionQueue cq = ctx().createCompletionQueue(64, channel, 0);
		Loopback lb = new Loopback(ctx(), cq, cq, 8, 64);
		try (Waker waker = new Waker()) {
			cq.requestNotify(false);
			lb.postRecv(1, 0);
			lb.postSend(2, 0, 16, null);
			assertThat(channel.getEvent(Duration.ofSeconds(20), waker)).isSameAs(cq);
			assertThat(cq.eventsUnacked()).isEqualTo(1);
			lb.close();
			CompletableFuture<Void> closing = CompletableFuture.runAsync(cq::close);
			closing.get(5, TimeUnit.SECONDS); // ibv_destroy_cq would block forever on the
												// unacked event
			assertThat(cq.eventsAcked()).isEqualTo(cq.eventsGot()).isEqualTo(1);
			channel.close();
		}
	}

	@Test
	void cqOverrunRaisesACqErrAsyncEventThatIsAckedAndDestroyStillCompletes() throws Exception {
		CompletionQueue tiny = ctx().createCompletionQueue(1, null, 0);
		CompletionQueue recv = ctx().createCompletionQueue(64, null, 0);
		Loopback lb = new Loopback(ctx(), tiny, recv, 16, 64);
		int overflow = tiny.cqe() + 3;
		for (int i = 0; i < overflow; i++) {
			lb.postRecv(i, i);
			lb.postSend(100 + i, i, 8, null);
		}
		AsyncEvent event = null;
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
		while (System.nanoTime() < deadline) {
			AsyncEvent e = ctx().getAsyncEvent(Duration.ofMillis(500));
			if (e != null && e.type() == AsyncEventType.CQ_ERR) {
				event = e;
				break;
			}
		}
		assertThat(event).as("IBV_EVENT_CQ_ERR after overrunning a %d-entry CQ", tiny.cqe()).isNotNull();
		assertThat(event.completionQueue()).isSameAs(tiny);
		assertThat(event.description()).containsIgnoringCase("CQ");
		assertThat(tiny.asyncErrors()).isPositive();
		// drain the rest so later tests start clean; every CQ_ERR was acked by
		// getAsyncEvent
		while (ctx().getAsyncEvent(Duration.ofMillis(200)) != null) {
			// more CQ_ERR events, one per dropped completion
		}
		lb.close();
		CompletableFuture.runAsync(() -> {
			tiny.close();
			recv.close();
		}).get(5, TimeUnit.SECONDS);
	}

	@Test
	void aDrainedExtendedCqHandsOutNoPhantomCompletion() {
		try (ExtendedCompletionQueue cq = ctx().createExtendedCompletionQueue(CqInitAttributes.of(32));
				CompletionQueue recv = ctx().createCompletionQueue(64, null, 0);
				Loopback lb = new Loopback(ctx(), cq, recv, 16, 64);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(32)) {
			System.out.printf("extended CQ iterator on %s: %s (softRoceDrainIsSafe: %s)%n", ctx().deviceName(),
					cq.usesBatchIterator() ? "batch" : "one completion per start/end", Rdma.softRoceDrainIsSafe());
			List<Long> ids = new ArrayList<>();
			for (int round = 0; round < 3; round++) {
				for (int i = 0; i < 5; i++) {
					lb.postRecv(i, i);
					lb.postSend(round * 10 + i, i, 8, null);
				}
				int expected = (round + 1) * 5;
				DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
					cq.poll(buffer, wc -> ids.add(wc.wrId()));
					return ids.size() >= expected;
				}, "round " + round);
				DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
					recv.poll(buffer);
					return true;
				}, "receives");
				for (int i = 0; i < 3; i++) {
					assertThat(cq.poll(buffer)).as("a drained CQ is empty").isZero();
				}
			}
			assertThat(ids).containsExactly(0L, 1L, 2L, 3L, 4L, 10L, 11L, 12L, 13L, 14L, 20L, 21L, 22L, 23L, 24L);
		}
	}

	@Test
	void theDocumentedDrainSequenceIsWhatCorruptsOldRxe() {
		// Proves the version check: drive the iterator the documented way (next_poll
		// until ENOENT, then end_poll)
		// and look for phantom completions. They appear exactly when the binding decided
		// to avoid that sequence.
		ExtendedCompletionQueue cq = ExtendedCompletionQueue.create(ctx(), CqInitAttributes.of(16),
				ExtendedCompletionQueue.IteratorMode.BATCH);
		boolean expectPhantoms = !ExtendedCompletionQueue.batchIterator(ctx(),
				ExtendedCompletionQueue.IteratorMode.AUTO);
		try (CompletionQueue recv = ctx().createCompletionQueue(64, null, 0);
				Loopback lb = new Loopback(ctx(), cq, recv, 8, 64);
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(64)) {
			for (int i = 0; i < 3; i++) {
				lb.postRecv(i, i);
				lb.postSend(i, i, 8, null);
			}
			List<Long> ids = new ArrayList<>();
			DeviceTestSupport.await(Duration.ofSeconds(20), () -> {
				cq.poll(buffer, wc -> ids.add(wc.wrId()));
				return ids.size() >= 3;
			}, "3 sends");
			int phantoms = cq.poll(buffer);
			System.out.printf("documented drain sequence on %s: %d phantom completion(s)%n", ctx().deviceName(),
					phantoms);
			if (expectPhantoms) {
				assertThat(phantoms).as("rxe before rdma-core 55 corrupts its consumer index").isPositive();
			}
			else {
				assertThat(phantoms).isZero();
			}
		}
		finally {
			device.reopen(); // the corrupted CQ cannot be trusted: a new context for the
								// other tests
		}
	}

}
