package dev.rdma.verbs;

import dev.rdma.verbs.efa.EfaWcFlag;
import dev.rdma.verbs.ffm.Efa;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What can be proven without a device: loading, the empty device list, argument checks,
 * enums and errors.
 */
class HostTest {

	@Test
	void libibverbsLoadsBySoname() {
		assertThat(Rdma.isAvailable()).as(Rdma.unavailableReason()).isTrue();
		assertThat(Rdma.unavailableReason()).isNull();
		Rdma.requireLibrary();
	}

	@Test
	void libefaLoadsWhenInstalled() {
		assertThat(Rdma.isEfaAvailable()).isEqualTo(Efa.LIB.isPresent());
	}

	@Test
	void aHostWithoutRdmaHasAnEmptyDeviceListNotAFailure() {
		try (DeviceList list = DeviceList.open()) {
			// on this kernel (no RDMA subsystem) ibv_get_device_list returns NULL with
			// ENOSYS
			if (!java.nio.file.Files.exists(java.nio.file.Path.of("/sys/class/infiniband"))) {
				assertThat(list.devices()).isEmpty();
				assertThat(list.byName("rxe0")).isEmpty();
			}
			else {
				assertThat(list.devices()).isNotNull();
			}
		}
	}

	@Test
	void openingAMissingDeviceNamesIt() {
		if (java.nio.file.Files.exists(java.nio.file.Path.of("/sys/class/infiniband/no-such-device"))) {
			return;
		}
		assertThatThrownBy(() -> Context.open("no-such-device")).isInstanceOf(java.util.NoSuchElementException.class)
			.hasMessageContaining("no-such-device");
	}

	@Test
	void aClosedDeviceListRefusesUse() {
		DeviceList list = DeviceList.open();
		list.close();
		list.close();
		assertThatThrownBy(list::devices).isInstanceOf(IllegalStateException.class);
	}

	@Test
	void verbsExceptionsCarryVerbErrnoAndText() {
		VerbsException e = new VerbsException("ibv_create_cq", Errno.EINVAL, "cqe=0");
		assertThat(e.verb()).isEqualTo("ibv_create_cq");
		assertThat(e.errno()).isEqualTo(22);
		assertThat(e.errnoName()).isEqualTo("EINVAL");
		assertThat(e.errnoText()).isEqualTo("Invalid argument");
		assertThat(e).hasMessage("ibv_create_cq failed: EINVAL (22): Invalid argument (cqe=0)");
		assertThat(new VerbsException("ibv_create_cq_ex", 0, null).getMessage()).contains("unknown provider failure");
		assertThat(new VerbsException("ibv_poll_cq", -2, null).getMessage()).contains("provider code -2")
			.contains("not an errno");
		assertThat(new VerbsException("efadv_create_cq", Errno.EOPNOTSUPP, null).errnoText())
			.isEqualTo("Operation not supported");
	}

	@Test
	void statusTextsComeFromIbvWcStatusStr() {
		assertThat(WcStatus.values()).hasSize(25);
		assertThat(WcStatus.of(5)).isEqualTo(WcStatus.WR_FLUSH_ERR);
		assertThat(WcStatus.WR_FLUSH_ERR.description()).isEqualTo("Work Request Flushed Error");
		assertThat(WcStatus.SUCCESS.description()).isEqualTo("success");
		assertThat(WcStatus.of(23)).isEqualTo(WcStatus.TM_RNDV_INCOMPLETE);
		assertThat(WcStatus.of(99)).isEqualTo(WcStatus.UNKNOWN);
		assertThat(WcStatus.of(-1)).isEqualTo(WcStatus.UNKNOWN);
	}

	@Test
	void opcodesMapBothWays() {
		assertThat(WcOpcode.of(128)).isEqualTo(WcOpcode.RECV);
		assertThat(WcOpcode.of(129)).isEqualTo(WcOpcode.RECV_RDMA_WITH_IMM);
		assertThat(WcOpcode.of(8)).isEqualTo(WcOpcode.FLUSH);
		assertThat(WcOpcode.of(500)).isEqualTo(WcOpcode.UNKNOWN);
		assertThat(WcOpcode.RECV.isReceive()).isTrue();
		assertThat(WcOpcode.SEND.isReceive()).isFalse();
	}

	@Test
	void cqInitAttributesDeriveCompMaskAndRefuseAPlainPdAsParentDomain() {
		CqInitAttributes a = CqInitAttributes.of(64);
		assertThat(a.wcFlagsMask()).isEqualTo(WcExFlag.STANDARD);
		assertThat(a.compMask()).isZero();
		assertThat(a.withFlags(EnumSet.of(CqCreateFlag.SINGLE_THREADED)).compMask())
			.isEqualTo(CqInitAttributes.IBV_CQ_INIT_ATTR_MASK_FLAGS);
		assertThat(BitFlag.mask(EnumSet.allOf(CqCreateFlag.class))).isEqualTo(3);
		assertThat(BitFlag.mask(EnumSet.allOf(WcExFlag.class))).isEqualTo(WcExFlag.SUPPORTED);
		assertThat(BitFlag.mask(EnumSet.allOf(EfaWcFlag.class))).isEqualTo(3);
	}

	@Test
	@SuppressWarnings("try") // close() called inside try-with-resources on purpose: it
								// must be idempotent
	void workCompletionBufferValidatesItsArguments() {
		assertThatThrownBy(() -> new WorkCompletionBuffer(0)).isInstanceOf(IllegalArgumentException.class);
		assertThatThrownBy(() -> new WorkCompletionBuffer(70000)).isInstanceOf(IllegalArgumentException.class);
		try (WorkCompletionBuffer b = new WorkCompletionBuffer(4)) {
			assertThat(b.capacity()).isEqualTo(4);
			assertThat(b.size()).isZero();
			assertThatThrownBy(() -> b.get(0)).isInstanceOf(IndexOutOfBoundsException.class);
			b.filledByPollCq(1);
			WorkCompletion view = b.get(0);
			b.close();
			b.close();
			assertThatThrownBy(view::wrId).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
			assertThatThrownBy(() -> b.get(0)).isInstanceOf(IllegalStateException.class);
		}
	}

	@Test
	void gidsPrintLikeRdmaCoreTools() {
		byte[] raw = new byte[16];
		raw[10] = (byte) 0xff;
		raw[11] = (byte) 0xff;
		raw[12] = (byte) 192;
		raw[13] = (byte) 168;
		raw[14] = 77;
		raw[15] = 1;
		Gid g = new Gid(raw);
		assertThat(g.isIpv4Mapped()).isTrue();
		assertThat(g).hasToString("::ffff:192.168.77.1");
		assertThat(new Gid(new byte[16]).isZero()).isTrue();
		assertThatThrownBy(() -> new Gid(new byte[4])).isInstanceOf(IllegalArgumentException.class);
	}

	@Test
	void aWakerServesOneWaitAtATimeAndItsCloseWaitsForTheWaitInProgress() throws Exception {
		Waker w = new Waker();
		java.util.concurrent.CountDownLatch claimed = new java.util.concurrent.CountDownLatch(1);
		java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
		Thread waiter = Thread.ofPlatform().start(() -> {
			w.claim();
			claimed.countDown();
			try {
				Thread.sleep(300); // "inside poll(2)"
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
			}
			w.unclaim();
			done.countDown();
		});
		assertThat(claimed.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
		assertThatThrownBy(w::claim).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("one waiting thread");
		long t0 = System.nanoTime();
		w.close(); // must not free the pollfd memory under the wait
		assertThat(done.getCount()).as("close returned only after the wait did").isZero();
		assertThat(System.nanoTime() - t0).isGreaterThan(100_000_000L);
		assertThatThrownBy(w::claim).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
		waiter.join();
	}

	@Test
	void aBufferIsClaimedByOnePollAndItsCloseWaitsForIt() throws Exception {
		WorkCompletionBuffer b = new WorkCompletionBuffer(4);
		b.claim();
		assertThatThrownBy(b::claim).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("from inside its own poll");
		java.util.concurrent.CompletableFuture<Void> other = java.util.concurrent.CompletableFuture.runAsync(b::claim);
		assertThat(other).failsWithin(java.time.Duration.ofSeconds(10))
			.withThrowableOfType(java.util.concurrent.ExecutionException.class)
			.withCauseInstanceOf(IllegalStateException.class)
			.withMessageContaining("one per polling thread");
		assertThatThrownBy(b::close).isInstanceOf(IllegalStateException.class).hasMessageContaining("inside a poll");
		java.util.concurrent.CompletableFuture<Void> closing = java.util.concurrent.CompletableFuture
			.runAsync(b::close);
		Thread.sleep(200);
		assertThat(closing).as("close waits for the poll that fills the buffer").isNotDone();
		assertThat(b.isClosed()).isFalse();
		b.unclaim();
		closing.get(10, java.util.concurrent.TimeUnit.SECONDS);
		assertThat(b.isClosed()).isTrue();
		assertThatThrownBy(b::claim).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
	}

	@Test
	void theExclusiveSlotExcludesAcrossTheRevocationOfItsBias() throws Exception {
		ExclusiveSlot slot = new ExclusiveSlot();
		int[] counter = { 0 }; // plain, incremented only inside the slot
		int perThread = 200_000;
		// the first thread is the owner (biased, plain stores) for a while before the
		// others arrive and revoke
		Thread first = Thread.ofPlatform().start(() -> {
			for (int i = 0; i < perThread; i++) {
				slot.enter("inc", "slot", true);
				counter[0]++;
				slot.exit();
			}
		});
		Thread.sleep(5);
		List<Thread> others = new ArrayList<>();
		for (int t = 0; t < 3; t++) {
			others.add(Thread.ofPlatform().start(() -> {
				for (int i = 0; i < perThread; i++) {
					slot.enter("inc", "slot", true);
					int v = counter[0];
					Thread.onSpinWait();
					counter[0] = v + 1;
					slot.exit();
				}
			}));
		}
		first.join();
		for (Thread t : others) {
			t.join();
		}
		assertThat(counter[0]).as("no increment lost: the slot excluded every pair of threads")
			.isEqualTo(4 * perThread);
		assertThat(slot.isFree()).isTrue();
		slot.enter("inc", "slot", true);
		assertThatThrownBy(() -> slot.enter("inc", "slot", true)).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("from inside its own poll");
		slot.exit();
		slot.close("close", "slot");
		assertThat(slot.enter("inc", "slot", true)).as("a closed slot admits nobody").isFalse();
	}

	@Test
	void wakerWakesAndCloses() {
		Waker w = new Waker();
		w.wake();
		w.clear();
		w.close();
		w.close();
		w.wake(); // a wake after close is ignored, never a write to a reused fd
		assertThatThrownBy(w::fd).isInstanceOf(IllegalStateException.class);
	}

}
