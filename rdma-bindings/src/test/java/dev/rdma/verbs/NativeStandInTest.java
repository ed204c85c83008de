package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.testing.StandInCq;
import dev.rdma.verbs.testing.StandInLibrary;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * The extended-CQ readers that no device here can exercise (timestamps, wallclock, cvlan,
 * flow_tag, tm_info) against a native stand-in: memory laid out as
 * {@code struct ibv_cq_ex} / {@code struct efadv_cq} whose function pointers are the C
 * functions of {@link StandInLibrary} (compiled by the test), which record each call and
 * return known values. Each reader must call the right slot, with the CQ (or efadv_cq)
 * pointer, and convert width, sign and byte order.
 */
class NativeStandInTest {

	@RegisterExtension
	final StandInCq standIn = new StandInCq();

	/**
	 * A handler that signals {@code inHandler} and stays in the callback until
	 * {@code letGo}: a poll in flight.
	 */
	private static CompletionHandler parkedHandler(java.util.concurrent.CountDownLatch inHandler,
			java.util.concurrent.CountDownLatch letGo) {
		return wc -> {
			inHandler.countDown();
			try {
				letGo.await();
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
			}
		};
	}

	private static CqInitAttributes all() {
		return CqInitAttributes.of(16).withWcFlags(EnumSet.allOf(WcExFlag.class));
	}

	@Test
	void everyExtendedReaderCallsItsSlotAndConvertsTheResult() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(1);
		List<Object> seen = new ArrayList<>();
		int n = q.poll(new WorkCompletionBuffer(4), wc -> {
			seen.add(wc.wrId());
			seen.add(wc.status());
			seen.add(wc.opcode());
			seen.add(Integer.toUnsignedLong(wc.vendorErr()));
			seen.add(Integer.toUnsignedLong(wc.byteLen()));
			seen.add(wc.immData());
			seen.add(wc.qpNum());
			seen.add(wc.srcQp());
			seen.add(wc.hasFlag(WcFlag.WITH_IMM));
			seen.add(wc.slid());
			seen.add(wc.sl());
			seen.add(wc.dlidPathBits());
			seen.add(wc.completionTimestamp());
			seen.add(wc.cvlan());
			seen.add(Integer.toUnsignedLong(wc.flowTag()));
			seen.add(wc.tmInfo());
			seen.add(wc.completionWallclockNanos());
		});
		assertThat(n).isEqualTo(1);
		assertThat(seen).containsExactly(0xDEAD_BEEF_0000_0042L, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM,
				0x8765_4321L, 4294967280L, 0x0A0B0C0D, 0x00ABCDEF, 0x00123456, true, 0x12345, 240, 0x81,
				0xF000_0000_0000_0001L, 65534, 0xCAFE_F00DL, new TmInfo(0x1122_3344_5566_7788L, 0x99AA_BBCC),
				1_700_000_000_123_456_789L);
		assertThat(StandInLibrary.calls()).containsExactly("start_poll", "read_opcode", "read_vendor_err",
				"read_byte_len", "read_imm_data", "read_qp_num", "read_src_qp", "read_wc_flags", "read_slid", "read_sl",
				"read_dlid_path_bits", "read_completion_ts", "read_cvlan", "read_flow_tag", "read_tm_info",
				"read_completion_wallclock_ns", "next_poll", "end_poll");
		q.close();
	}

	@Test
	void batchCopyReadsEveryRequestedFieldIntoTheBuffer() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(2);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(8)) {
			assertThat(q.poll(buffer)).isEqualTo(2);
			WorkCompletion wc = buffer.get(1);
			assertThat(wc.immData()).isEqualTo(0x0A0B0C0D);
			assertThat(wc.slid()).isEqualTo(0x12345);
			assertThat(wc.sl()).isEqualTo(240);
			assertThat(wc.cvlan()).isEqualTo(65534);
			assertThat(wc.completionTimestamp()).isEqualTo(0xF000_0000_0000_0001L);
			assertThat(wc.completionWallclockNanos()).isEqualTo(1_700_000_000_123_456_789L);
			assertThat(wc.tmInfo()).isEqualTo(new TmInfo(0x1122_3344_5566_7788L, 0x99AA_BBCC));
			assertThat(wc.flowTag()).isEqualTo(0xCAFE_F00D);
			assertThat(wc.copy().byteLen()).isEqualTo(0xFFFF_FFF0);
			assertThatThrownBy(wc::pkeyIndex).isInstanceOf(IllegalStateException.class);
		}
		assertThat(StandInLibrary.calls().stream().filter("end_poll"::equals)).hasSize(1);
		q.close();
	}

	@Test
	void batchCopyOfAFailedCompletionCallsOnlyTheReadersValidOnErrorAndLeavesNoStaleField() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
			StandInLibrary.remaining(1); // a successful completion first fills slot 0 of
											// the buffer
			assertThat(q.poll(buffer)).isEqualTo(1);
			assertThat(buffer.get(0).opcode()).isEqualTo(WcOpcode.RECV_RDMA_WITH_IMM);
			standIn.cq().set(JAVA_INT, Layouts.CQ_EX_STATUS, WcStatus.WR_FLUSH_ERR.code());
			standIn.cq().set(JAVA_LONG, Layouts.CQ_EX_WR_ID, 7L);
			StandInLibrary.clear();
			StandInLibrary.remaining(1);
			assertThat(q.poll(buffer)).isEqualTo(1);
			// ibv_poll_cq(3): only wr_id, status, qp_num and vendor_err are valid on
			// error
			assertThat(StandInLibrary.calls()).containsExactly("start_poll", "read_vendor_err", "read_qp_num",
					"next_poll", "end_poll");
			WorkCompletion wc = buffer.get(0);
			assertThat(wc.wrId()).isEqualTo(7L);
			assertThat(wc.status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
			assertThat(wc.isSuccess()).isFalse();
			assertThat(Integer.toUnsignedLong(wc.vendorErr())).isEqualTo(0x8765_4321L);
			assertThat(wc.qpNum()).isEqualTo(0x00ABCDEF);
			assertThat(wc.opcodeCode()).isZero();
			assertThat(wc.wcFlags()).isZero();
			assertThat(wc.byteLen()).isZero();
			assertThat(wc.immData()).isZero();
			assertThat(wc.srcQp()).isZero();
			assertThat(wc.slid()).isZero();
			assertThat(wc.sl()).isZero();
			assertThat(wc.dlidPathBits()).isZero();
			// nor the extended fields, which the successful completion before had set
			assertThat(wc.completionTimestamp()).isZero();
			assertThat(wc.completionWallclockNanos()).isZero();
			assertThat(wc.cvlan()).isZero();
			assertThat(wc.flowTag()).isZero();
			assertThat(wc.tmInfo()).isEqualTo(new TmInfo(0, 0));
		}
		q.close();
	}

	/** The iterator's own calls among the recorded ones (the readers left out). */
	private static List<String> iteratorCalls() {
		return StandInLibrary.calls().stream().filter(c -> c.endsWith("_poll")).toList();
	}

	@Test
	void aBatchCopyThatFailsAfterSomeCompletionsKeepsThemInTheBuffer() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(8)) {
			StandInLibrary.remaining(5);
			StandInLibrary.failAfter(3, -2); // start_poll and two next_poll succeed, then
												// mlx5's -2
			VerbsException e = catchThrowableOfType(VerbsException.class, () -> q.poll(buffer));
			assertThat(buffer.size()).as("the completions taken before the failure").isEqualTo(3);
			assertThat(e).hasMessageContaining("ibv_next_poll failed")
				.hasMessageContaining("provider code -2")
				.hasMessageContaining("3 completion(s) taken off the CQ before it are in the buffer");
			assertThat(iteratorCalls()).containsExactly("start_poll", "next_poll", "next_poll", "next_poll",
					"end_poll");
			for (int i = 0; i < 3; i++) {
				assertThat(buffer.get(i).wrId()).isEqualTo(0xDEAD_BEEF_0000_0042L);
				assertThat(buffer.get(i).immData()).isEqualTo(0x0A0B0C0D);
			}
			// a failing start_poll leaves no stale size from the poll before
			StandInLibrary.clear();
			StandInLibrary.failAfter(0, Errno.EIO);
			assertThatThrownBy(() -> q.poll(buffer)).isInstanceOf(VerbsException.class)
				.hasMessageContaining("ibv_start_poll failed")
				.hasMessageContaining("0 completion(s)");
			assertThat(iteratorCalls()).containsExactly("start_poll");
			assertThat(buffer.size()).isZero();
		}
		q.close();
	}

	@Test
	void aBatchCopyOfOneCompletionPerBatchThatFailsLaterKeepsTheTakenOnesInTheBuffer() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), false, StandInCq.DESTROY);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(8)) {
			StandInLibrary.remaining(5);
			StandInLibrary.failAfter(2, Errno.EIO); // two batches of one, then the third
													// start_poll fails
			VerbsException e = catchThrowableOfType(VerbsException.class, () -> q.poll(buffer));
			assertThat(buffer.size()).as("the completions taken before the failure").isEqualTo(2);
			assertThat(e).hasMessageContaining("ibv_start_poll failed")
				.hasMessageContaining("EIO")
				.hasMessageContaining("2 completion(s)");
			assertThat(iteratorCalls()).containsExactly("start_poll", "end_poll", "start_poll", "end_poll",
					"start_poll");
			assertThat(buffer.get(1).wrId()).isEqualTo(0xDEAD_BEEF_0000_0042L);
		}
		q.close();
	}

	@Test
	void aHandlerPollThatFailsSaysHowManyCompletionsWereHandedOut() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(5);
		StandInLibrary.failAfter(2, Errno.EIO);
		List<Long> handled = new ArrayList<>();
		assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(8), wc -> handled.add(wc.wrId())))
			.isInstanceOf(VerbsException.class)
			.hasMessageContaining("ibv_next_poll failed")
			.hasMessageContaining("2 completion(s) taken off the CQ before it were handed to the handler");
		assertThat(handled).hasSize(2);
		assertThat(iteratorCalls()).endsWith("end_poll");
		q.close();
	}

	@Test
	void aSnapshotKeepsTheInvalidatedRkeyAsTheViewReadsIt() {
		// read_imm_data's slot holds a WITH_INV completion's rkey in host order: the
		// stand-in returns 0x0D0C0B0A
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(1);
		List<Integer> rkeys = new ArrayList<>();
		q.poll(new WorkCompletionBuffer(1), wc -> {
			rkeys.add(wc.invalidatedRkey());
			rkeys.add(wc.copy().invalidatedRkey());
		});
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(1)) {
			StandInLibrary.remaining(1);
			assertThat(q.poll(buffer)).isEqualTo(1);
			rkeys.add(buffer.get(0).invalidatedRkey());
			rkeys.add(buffer.get(0).copy().invalidatedRkey());
		}
		q.close();
		CompletionQueue legacy = StandIns.legacy(standIn.cq(), StandInLibrary.fn("si_poll_cq"), StandInCq.DESTROY);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(1)) {
			StandInLibrary.remaining(1);
			assertThat(legacy.poll(buffer)).isEqualTo(1);
			rkeys.add(buffer.get(0).invalidatedRkey());
			rkeys.add(buffer.get(0).copy().invalidatedRkey());
			assertThat(buffer.get(0).copy().immData()).isEqualTo(0x0A0B0C0D);
		}
		legacy.close();
		assertThat(rkeys).as("extended view, its copy, batch copy, its copy, legacy view, its copy")
			.containsExactly(0x0D0C0B0A, 0x0D0C0B0A, 0x0D0C0B0A, 0x0D0C0B0A, 0x0D0C0B0A, 0x0D0C0B0A);
	}

	@Test
	void aCqCarriesTheCallersAttachmentWithoutANativeCall() {
		CompletionQueue legacy = StandIns.legacy(standIn.cq(), StandInLibrary.fn("si_poll_cq"), StandInCq.DESTROY);
		assertThat(legacy.attachment()).isNull();
		Object mine = new Object();
		assertThat(legacy.attach(mine)).isNull();
		assertThat(legacy.attachment()).isSameAs(mine);
		assertThat(legacy.attach("replaced")).as("the previous attachment").isSameAs(mine);
		legacy.close();
		assertThat(legacy.attachment()).isEqualTo("replaced");
		assertThat(StandInLibrary.calls()).containsExactly("destroy_cq");
	}

	@Test
	void aFieldThatWasNotRequestedThrowsWithoutCallingTheProvider() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(),
				CqInitAttributes.of(16).withWcFlags(EnumSet.of(WcExFlag.BYTE_LEN)), true, StandInCq.DESTROY);
		StandInLibrary.remaining(1);
		List<Throwable> errors = new ArrayList<>();
		q.poll(new WorkCompletionBuffer(1), wc -> {
			for (Runnable r : List.<Runnable>of(wc::immData, wc::qpNum, wc::srcQp, wc::slid, wc::sl, wc::dlidPathBits,
					wc::completionTimestamp, wc::cvlan, wc::flowTag, wc::tmInfo, wc::completionWallclockNanos)) {
				try {
					r.run();
				}
				catch (IllegalStateException e) {
					errors.add(e);
				}
			}
		});
		assertThat(errors).hasSize(11);
		assertThat(errors.getFirst()).hasMessageContaining("IMM was not requested");
		assertThat(StandInLibrary.calls()).containsExactly("start_poll", "end_poll");
		q.close();
	}

	@Test
	void theIteratorProtocolIsEnforced() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(0);
		assertThat(q.startPoll()).isFalse(); // ENOENT: no end_poll may follow
		assertThatThrownBy(q::endPoll).isInstanceOf(IllegalStateException.class);
		assertThatThrownBy(q::current).isInstanceOf(IllegalStateException.class);
		StandInLibrary.remaining(1);
		assertThat(q.startPoll()).isTrue();
		assertThatThrownBy(q::startPoll).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("between startPoll() and endPoll()");
		assertThat(q.current().wrId()).isEqualTo(0xDEAD_BEEF_0000_0042L);
		assertThat(q.nextPoll()).isFalse();
		q.endPoll();
		assertThat(StandInLibrary.calls()).containsExactly("start_poll", "start_poll", "next_poll", "end_poll");
		q.close();
	}

	@Test
	void onceNextPollEndedOrFailedNoFieldIsReadFromTheProviderAndNoStaleOneShown() {
		// batch mode, next_poll into ENOENT
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(1);
		assertThat(q.startPoll()).isTrue();
		WorkCompletion wc = q.current();
		assertThat(wc.opcode()).isEqualTo(WcOpcode.RECV_RDMA_WITH_IMM);
		assertThat(q.nextPoll()).isFalse();
		assertNothingReadable(q, wc);
		q.endPoll();
		// batch mode, next_poll failing
		StandInLibrary.clear();
		StandInLibrary.remaining(5);
		StandInLibrary.failAfter(1, Errno.EIO);
		assertThat(q.startPoll()).isTrue();
		assertThatThrownBy(q::nextPoll).isInstanceOf(VerbsException.class).hasMessageContaining("EIO");
		assertNothingReadable(q, wc);
		q.endPoll();
		assertThat(StandInLibrary.calls()).containsExactly("end_poll");
		q.close();
		// one completion per batch: nextPoll() is false without a native call
		ExtendedCompletionQueue one = StandIns.extended(standIn.cq(), all(), false, StandInCq.DESTROY);
		StandInLibrary.clear();
		StandInLibrary.remaining(2);
		assertThat(one.startPoll()).isTrue();
		WorkCompletion first = one.current();
		assertThat(one.nextPoll()).isFalse();
		assertThat(StandInLibrary.calls()).containsExactly("start_poll");
		assertNothingReadable(one, first);
		one.endPoll();
		assertThat(StandInLibrary.calls()).containsExactly("end_poll");
		one.close();
	}

	/**
	 * Every read of {@code wc}, {@code current()} and another {@code nextPoll()} throw
	 * IllegalStateException, and none reaches the provider.
	 */
	private static void assertNothingReadable(ExtendedCompletionQueue q, WorkCompletion wc) {
		StandInLibrary.clear();
		List<Runnable> reads = List.of(q::current, q::nextPoll, wc::wrId, wc::statusCode, wc::opcodeCode, wc::vendorErr,
				wc::byteLen, wc::immData, wc::qpNum, wc::wcFlags, wc::slid, wc::completionTimestamp, wc::tmInfo,
				wc::copy);
		for (Runnable read : reads) {
			assertThatThrownBy(read::run).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("after nextPoll() returned false or failed");
		}
		assertThat(StandInLibrary.calls()).as("no provider call once the batch has no current completion").isEmpty();
	}

	@Test
	void aThrowingHandlerStillEndsTheBatch() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(3);
		assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(8), wc -> {
			throw new IllegalArgumentException("listener failed");
		})).hasMessage("listener failed");
		assertThat(StandInLibrary.calls()).containsExactly("start_poll", "end_poll");
		q.close();
	}

	@Test
	void aClosedCqThrowsInsteadOfTouchingFreedMemory() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		q.close();
		q.close(); // idempotent
		assertThat(q.isClosed()).isTrue();
		assertThatThrownBy(q::startPoll).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
		assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(1))).isInstanceOf(IllegalStateException.class);
		assertThatThrownBy(q::cqe).isInstanceOf(IllegalStateException.class);
		assertThat(StandInLibrary.calls()).as("destroyed once, through the CQ's destroy function; nothing after")
			.containsExactly("destroy_cq");
	}

	@Test
	void closeWaitsForTheOwnersPollInFlightAndLaterPollsThrow() throws Exception {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
		java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
		java.util.concurrent.atomic.AtomicReference<Throwable> pollerEnd = new java.util.concurrent.atomic.AtomicReference<>();
		StandInLibrary.remaining(1);
		Thread poller = new Thread(() -> {
			try (WorkCompletionBuffer b = new WorkCompletionBuffer(4)) {
				while (true) {
					q.poll(b, parkedHandler(inHandler, letGo));
				}
			}
			catch (Throwable t) {
				pollerEnd.set(t);
			}
		}, "owner-poller");
		poller.start();
		assertThat(inHandler.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
		java.util.concurrent.CompletableFuture<Void> closing = java.util.concurrent.CompletableFuture
			.runAsync(q::close);
		Thread.sleep(300);
		assertThat(closing).as("close must wait for the poll in flight").isNotDone();
		assertThat(q.isClosed()).isFalse();
		letGo.countDown();
		closing.get(10, java.util.concurrent.TimeUnit.SECONDS);
		poller.join(10_000);
		assertThat(q.isClosed()).isTrue();
		assertThat(pollerEnd.get()).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
		// end_poll ran before the CQ was destroyed: the batch was complete when close()
		// went on
		assertThat(StandInLibrary.calls()).containsSubsequence("start_poll", "end_poll");
	}

	@Test
	void aSecondPollingThreadWaitsInJavaForTheFirstsBatchAndThenPolls() throws Exception {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
		java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
		StandInLibrary.remaining(1);
		Thread first = new Thread(() -> {
			try (WorkCompletionBuffer b = new WorkCompletionBuffer(1)) {
				q.poll(b, parkedHandler(inHandler, letGo));
			}
		}, "first-poller");
		first.start();
		assertThat(inHandler.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
		StandInLibrary.clear();
		java.util.concurrent.CompletableFuture<Integer> second = java.util.concurrent.CompletableFuture
			.supplyAsync(() -> {
				try (WorkCompletionBuffer b = new WorkCompletionBuffer(1)) {
					return q.poll(b, wc -> {
					});
				}
			});
		Thread.sleep(300);
		assertThat(second).as("the second poll waits while the first holds the batch").isNotDone();
		assertThat(StandInLibrary.calls()).as("and it waits in Java: no start_poll while the first batch is open")
			.isEmpty();
		letGo.countDown();
		assertThat(second.get(10, java.util.concurrent.TimeUnit.SECONDS)).isZero();
		first.join(10_000);
		assertThat(StandInLibrary.calls()).containsSubsequence("end_poll", "start_poll");
		q.close();
		assertThat(q.isClosed()).isTrue();
	}

	@Test
	void reEnteringTheCqFromItsOwnHandlerIsRefusedBeforeAnyNativeCall() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		List<Throwable> errors = refusalsOfOneCompletion(q, wc -> {
			StandInLibrary.clear();
			try (WorkCompletionBuffer other = new WorkCompletionBuffer(1)) {
				q.poll(other);
			}
		});
		assertThat(errors).singleElement()
			.satisfies(e -> assertThat(e).hasMessageContaining("from inside its own poll"));
		assertThat(StandInLibrary.calls()).as("no start_poll while the batch is open").doesNotContain("start_poll");
		errors = refusalsOfOneCompletion(q, wc -> q.resize(64));
		assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("ibv_resize_cq"));
		errors = refusalsOfOneCompletion(q, wc -> q.startPoll());
		assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("ibv_start_poll"));
		errors = refusalsOfOneCompletion(q, wc -> q.endPoll());
		assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("startPoll()"));
		q.close();
	}

	@Test
	void theRawIteratorOwnsTheCqUntilEndPoll() throws Exception {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		StandInLibrary.remaining(1);
		assertThat(q.startPoll()).isTrue();
		assertThatThrownBy(q::startPoll).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("from inside its own poll");
		assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(1))).isInstanceOf(IllegalStateException.class);
		assertThatThrownBy(q::close).isInstanceOf(IllegalStateException.class).hasMessageContaining("startPoll()");
		java.util.concurrent.CompletableFuture<WorkCompletion> elsewhere = java.util.concurrent.CompletableFuture
			.supplyAsync(q::current);
		assertThat(elsewhere).failsWithin(java.time.Duration.ofSeconds(10))
			.withThrowableOfType(java.util.concurrent.ExecutionException.class)
			.withCauseInstanceOf(IllegalStateException.class);
		assertThat(q.current().wrId()).isEqualTo(0xDEAD_BEEF_0000_0042L);
		assertThat(q.nextPoll()).isFalse();
		q.endPoll();
		assertThatThrownBy(q::endPoll).isInstanceOf(IllegalStateException.class);
		assertThatThrownBy(q::current).isInstanceOf(IllegalStateException.class);
		q.close();
		assertThat(q.isClosed()).isTrue();
	}

	@Test
	void closingFromInsideItsOwnCallbackIsRefused() {
		ExtendedCompletionQueue q = StandIns.extended(standIn.cq(), all(), true, StandInCq.DESTROY);
		List<Throwable> errors = refusalsOfOneCompletion(q, wc -> q.close());
		assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("own poll callback"));
		assertThat(q.isClosed()).isFalse();
		q.close();
		assertThat(q.isClosed()).isTrue();
	}

	/**
	 * Polls one stand-in completion and runs {@code action} on it, collecting the
	 * IllegalStateException it throws.
	 */
	private static List<Throwable> refusalsOfOneCompletion(ExtendedCompletionQueue q,
			java.util.function.Consumer<WorkCompletion> action) {
		StandInLibrary.remaining(1);
		List<Throwable> errors = new ArrayList<>();
		q.poll(new WorkCompletionBuffer(1), wc -> {
			try {
				action.accept(wc);
			}
			catch (IllegalStateException e) {
				errors.add(e);
			}
		});
		return errors;
	}

}
