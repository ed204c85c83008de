package dev.rdma.verbs;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A thread that polls in a tight loop gives the slot back for a few instructions only
 * before it takes it again. Without a hand-off, a waiter that parks between its tries
 * sees it free only by luck: under emulation (run 9, two threads polling one extended CQ
 * under GC pressure, where a parked thread wakes rarely) a waiter gave up after 10 s
 * although every poll of the other thread was short. The waiter that queued first goes
 * next: it waits for the hold in progress, not for luck.
 */
class ExclusiveSlotFairnessTest {

	@Test
	void aThreadThatTakesTheSlotAgainAtOnceGoesAfterTheThreadWaitingForIt() throws Exception {
		ExclusiveSlot slot = new ExclusiveSlot();
		for (int round = 0; round < 20; round++) {
			List<String> order = new CopyOnWriteArrayList<>();
			assertThat(slot.enter("poll", "slot", true)).isTrue();
			CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> {
				if (slot.enter("poll", "slot", true)) {
					order.add("waiter");
					slot.exit();
				}
			}, r -> Thread.ofPlatform().name("waiter").start(r));
			awaitWaiting(slot);
			Thread.sleep(5); // the waiter is past its spins, parked between tries
			slot.exit();
			assertThat(slot.enter("poll", "slot", true)).isTrue(); // again at once
			order.add("holder");
			slot.exit();
			waiter.get(10, TimeUnit.SECONDS);
			assertThat(order).as("round %d: who took the slot after the holder gave it back", round)
				.containsExactly("waiter", "holder");
		}
	}

	@Test
	void aCloseWaitingForTheSlotGoesBeforeTheHoldersNextPoll() throws Exception {
		ExclusiveSlot slot = new ExclusiveSlot();
		assertThat(slot.enter("poll", "slot", true)).isTrue();
		CompletableFuture<Void> close = CompletableFuture.runAsync(() -> slot.close("close", "slot"),
				r -> Thread.ofPlatform().name("closer").start(r));
		awaitWaiting(slot);
		Thread.sleep(5);
		slot.exit();
		assertThat(slot.enter("poll", "slot", true)).as("the holder's next poll, after the waiting close").isFalse();
		close.get(10, TimeUnit.SECONDS);
		assertThat(slot.isClosed()).isTrue();
	}

	private static void awaitWaiting(ExclusiveSlot slot) throws InterruptedException {
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
		while (slot.waiter() == null) {
			assertThat(System.nanoTime() - deadline).as("a thread queued for the slot within 10 s").isNegative();
			Thread.sleep(1);
		}
	}

}
