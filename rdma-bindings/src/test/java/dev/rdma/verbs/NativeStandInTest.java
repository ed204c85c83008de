package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The extended-CQ and EFA readers that no device here can exercise (timestamps, wallclock, cvlan, flow_tag, tm_info,
 * sgid, is_unsolicited) against a native stand-in: memory laid out as {@code struct ibv_cq_ex} /
 * {@code struct efadv_cq} whose function pointers are FFM upcall stubs that record each call and return known values.
 * Each reader must call the right slot, with the CQ (or efadv_cq) pointer, and convert width, sign and byte order.
 */
class NativeStandInTest {

    static final List<String> CALLS = new ArrayList<>();
    static long cqAddress;
    static long efadvAddress;
    static int remaining;

    private Arena arena;
    private MemorySegment cq;
    private MemorySegment efadv;

    // ---- the stubs: each records its slot and the pointer it was called with

    static int startPoll(MemorySegment cqp, MemorySegment attr) {
        record("start_poll", cqp);
        assertThat(attr.reinterpret(4).get(JAVA_INT, 0)).as("ibv_poll_cq_attr.comp_mask").isZero();
        return remaining-- > 0 ? 0 : Errno.ENOENT;
    }

    static int nextPoll(MemorySegment cqp) {
        record("next_poll", cqp);
        return remaining-- > 0 ? 0 : Errno.ENOENT;
    }

    static void endPoll(MemorySegment cqp) {
        record("end_poll", cqp);
    }

    static int readOpcode(MemorySegment cqp) {
        record("read_opcode", cqp);
        return WcOpcode.RECV_RDMA_WITH_IMM.code();
    }

    static int readVendorErr(MemorySegment cqp) {
        record("read_vendor_err", cqp);
        return 0x8765_4321;
    }

    static int readByteLen(MemorySegment cqp) {
        record("read_byte_len", cqp);
        return 0xFFFF_FFF0; // 4294967280 as u32
    }

    static int readImmData(MemorySegment cqp) {
        record("read_imm_data", cqp);
        return Integer.reverseBytes(0x0A0B0C0D); // the provider returns network order
    }

    static int readQpNum(MemorySegment cqp) {
        record("read_qp_num", cqp);
        return 0x00ABCDEF;
    }

    static int readSrcQp(MemorySegment cqp) {
        record("read_src_qp", cqp);
        return 0x00123456;
    }

    static int readWcFlags(MemorySegment cqp) {
        record("read_wc_flags", cqp);
        return WcFlag.WITH_IMM.bit() | WcFlag.GRH.bit();
    }

    static int readSlid(MemorySegment cqp) {
        record("read_slid", cqp);
        return 0x0001_2345; // u32: wider than ibv_wc.slid
    }

    static byte readSl(MemorySegment cqp) {
        record("read_sl", cqp);
        return (byte) 0xF0; // u8 240
    }

    static byte readDlidPathBits(MemorySegment cqp) {
        record("read_dlid_path_bits", cqp);
        return (byte) 0x81;
    }

    static long readCompletionTs(MemorySegment cqp) {
        record("read_completion_ts", cqp);
        return 0xF000_0000_0000_0001L;
    }

    static short readCvlan(MemorySegment cqp) {
        record("read_cvlan", cqp);
        return (short) 0xFFFE; // u16 65534
    }

    static int readFlowTag(MemorySegment cqp) {
        record("read_flow_tag", cqp);
        return 0xCAFE_F00D;
    }

    static void readTmInfo(MemorySegment cqp, MemorySegment info) {
        record("read_tm_info", cqp);
        MemorySegment i = info.reinterpret(16);
        i.set(JAVA_LONG, 0, 0x1122_3344_5566_7788L);
        i.set(JAVA_INT, 8, 0x99AA_BBCC);
    }

    static long readWallclock(MemorySegment cqp) {
        record("read_completion_wallclock_ns", cqp);
        return 1_700_000_000_123_456_789L;
    }

    static int wcReadSgid(MemorySegment dv, MemorySegment gid) {
        CALLS.add("wc_read_sgid");
        assertThat(dv.address()).isEqualTo(efadvAddress);
        MemorySegment g = gid.reinterpret(16);
        for (int i = 0; i < 16; i++) {
            g.set(JAVA_BYTE, i, (byte) (0xF0 + i));
        }
        return 0;
    }

    static boolean wcIsUnsolicited(MemorySegment dv) {
        CALLS.add("wc_is_unsolicited");
        assertThat(dv.address()).isEqualTo(efadvAddress);
        return true;
    }

    /** A handler that signals {@code inHandler} and stays in the callback until {@code letGo}: a poll in flight. */
    private static CompletionHandler parkedHandler(java.util.concurrent.CountDownLatch inHandler,
            java.util.concurrent.CountDownLatch letGo) {
        return wc -> {
            inHandler.countDown();
            try {
                letGo.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    private static void record(String slot, MemorySegment cqp) {
        CALLS.add(slot);
        assertThat(cqp.address()).as(slot + " called with the CQ pointer").isEqualTo(cqAddress);
    }

    private void stub(MemorySegment struct, long offset, String method, FunctionDescriptor fd) throws Exception {
        var mh = MethodHandles.lookup().findStatic(NativeStandInTest.class, method, fd.toMethodType());
        struct.set(ADDRESS, offset, Linker.nativeLinker().upcallStub(mh, fd, arena));
    }

    private void slot(String field, String method, FunctionDescriptor fd) throws Exception {
        stub(cq, Layouts.off(Layouts.IBV_CQ_EX, field), method, fd);
    }

    @BeforeEach
    void standIn() throws Exception {
        CALLS.clear();
        arena = Arena.ofShared(); // the stand-in is polled from other threads too
        cq = arena.allocate(Layouts.IBV_CQ_EX);
        efadv = arena.allocate(24, 8);
        cqAddress = cq.address();
        efadvAddress = efadv.address();
        FunctionDescriptor intOf = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        slot("start_poll", "startPoll", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        slot("next_poll", "nextPoll", intOf);
        slot("end_poll", "endPoll", FunctionDescriptor.ofVoid(ADDRESS));
        slot("read_opcode", "readOpcode", intOf);
        slot("read_vendor_err", "readVendorErr", intOf);
        slot("read_byte_len", "readByteLen", intOf);
        slot("read_imm_data", "readImmData", intOf);
        slot("read_qp_num", "readQpNum", intOf);
        slot("read_src_qp", "readSrcQp", intOf);
        slot("read_wc_flags", "readWcFlags", intOf);
        slot("read_slid", "readSlid", intOf);
        slot("read_sl", "readSl", FunctionDescriptor.of(JAVA_BYTE, ADDRESS));
        slot("read_dlid_path_bits", "readDlidPathBits", FunctionDescriptor.of(JAVA_BYTE, ADDRESS));
        slot("read_completion_ts", "readCompletionTs", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        slot("read_cvlan", "readCvlan", FunctionDescriptor.of(JAVA_SHORT, ADDRESS));
        slot("read_flow_tag", "readFlowTag", intOf);
        slot("read_tm_info", "readTmInfo", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS));
        slot("read_completion_wallclock_ns", "readWallclock", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        stub(efadv, Layouts.off(Layouts.EFADV_CQ, "wc_read_sgid"), "wcReadSgid",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        stub(efadv, Layouts.EFADV_CQ_WC_IS_UNSOLICITED, "wcIsUnsolicited",
                FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS));
        cq.set(JAVA_LONG, Layouts.CQ_EX_WR_ID, 0xDEAD_BEEF_0000_0042L);
        cq.set(JAVA_INT, Layouts.CQ_EX_STATUS, 0);
        assertThat(MethodType.methodType(int.class, MemorySegment.class)).isEqualTo(intOf.toMethodType());
    }

    @AfterEach
    void free() {
        arena.close();
    }

    private static CqInitAttributes all() {
        return CqInitAttributes.of(16).withWcFlags(EnumSet.allOf(WcExFlag.class));
    }

    @Test
    void everyExtendedReaderCallsItsSlotAndConvertsTheResult() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        remaining = 1;
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
        assertThat(CALLS).containsExactly("start_poll", "read_opcode", "read_vendor_err", "read_byte_len",
                "read_imm_data", "read_qp_num", "read_src_qp", "read_wc_flags", "read_slid", "read_sl",
                "read_dlid_path_bits", "read_completion_ts", "read_cvlan", "read_flow_tag", "read_tm_info",
                "read_completion_wallclock_ns", "next_poll", "end_poll");
        q.close();
    }

    @Test
    void batchCopyReadsEveryRequestedFieldIntoTheBuffer() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        remaining = 2;
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
        assertThat(CALLS.stream().filter("end_poll"::equals)).hasSize(1);
        q.close();
    }

    @Test
    void batchCopyOfAFailedCompletionCallsOnlyTheReadersValidOnErrorAndLeavesNoStaleField() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
            remaining = 1; // a successful completion first fills slot 0 of the buffer
            assertThat(q.poll(buffer)).isEqualTo(1);
            assertThat(buffer.get(0).opcode()).isEqualTo(WcOpcode.RECV_RDMA_WITH_IMM);
            cq.set(JAVA_INT, Layouts.CQ_EX_STATUS, WcStatus.WR_FLUSH_ERR.code());
            cq.set(JAVA_LONG, Layouts.CQ_EX_WR_ID, 7L);
            CALLS.clear();
            remaining = 1;
            assertThat(q.poll(buffer)).isEqualTo(1);
            // ibv_poll_cq(3): only wr_id, status, qp_num and vendor_err are valid on error
            assertThat(CALLS).containsExactly("start_poll", "read_vendor_err", "read_qp_num", "next_poll",
                    "end_poll");
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
        }
        q.close();
    }

    @Test
    void aFieldThatWasNotRequestedThrowsWithoutCallingTheProvider() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq,
                CqInitAttributes.of(16).withWcFlags(EnumSet.of(WcExFlag.BYTE_LEN)));
        remaining = 1;
        List<Throwable> errors = new ArrayList<>();
        q.poll(new WorkCompletionBuffer(1), wc -> {
            for (Runnable r : List.<Runnable>of(wc::immData, wc::qpNum, wc::srcQp, wc::slid, wc::sl,
                    wc::dlidPathBits, wc::completionTimestamp, wc::cvlan, wc::flowTag, wc::tmInfo,
                    wc::completionWallclockNanos, wc::sgid, wc::isUnsolicited)) {
                try {
                    r.run();
                } catch (IllegalStateException e) {
                    errors.add(e);
                }
            }
        });
        assertThat(errors).hasSize(13);
        assertThat(errors.getFirst()).hasMessageContaining("IMM was not requested");
        assertThat(CALLS).containsExactly("start_poll", "end_poll");
        q.close();
    }

    @Test
    void theIteratorProtocolIsEnforced() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        remaining = 0;
        assertThat(q.startPoll()).isFalse(); // ENOENT: no end_poll may follow
        assertThatThrownBy(q::endPoll).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(q::current).isInstanceOf(IllegalStateException.class);
        remaining = 1;
        assertThat(q.startPoll()).isTrue();
        assertThatThrownBy(q::startPoll).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("between startPoll() and endPoll()");
        assertThat(q.current().wrId()).isEqualTo(0xDEAD_BEEF_0000_0042L);
        assertThat(q.nextPoll()).isFalse();
        q.endPoll();
        assertThat(CALLS).containsExactly("start_poll", "start_poll", "next_poll", "end_poll");
        q.close();
    }

    @Test
    void aThrowingHandlerStillEndsTheBatch() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        remaining = 3;
        assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(8), wc -> {
            throw new IllegalArgumentException("listener failed");
        })).hasMessage("listener failed");
        assertThat(CALLS).containsExactly("start_poll", "end_poll");
        q.close();
    }

    @Test
    void efaReadersCallTheEfadvCqSlotsOnlyWhenGranted() {
        EfaCompletionQueue q = EfaCompletionQueue.standIn(cq, efadv, all(),
                EnumSet.of(EfaWcFlag.SGID, EfaWcFlag.IS_UNSOLICITED));
        remaining = 1;
        List<Object> seen = new ArrayList<>();
        q.poll(new WorkCompletionBuffer(1), wc -> {
            seen.add(wc.sgid());
            seen.add(wc.isUnsolicited());
        });
        byte[] expected = new byte[16];
        for (int i = 0; i < 16; i++) {
            expected[i] = (byte) (0xF0 + i);
        }
        assertThat(seen).containsExactly(new Gid(expected), true);
        assertThat(CALLS).contains("wc_read_sgid", "wc_is_unsolicited");
        q.close();

        CALLS.clear();
        EfaCompletionQueue sgidOnly = EfaCompletionQueue.standIn(cq, efadv, all(), Set.of(EfaWcFlag.SGID));
        List<Throwable> errors = refusalsOfOneCompletion(sgidOnly, WorkCompletion::isUnsolicited);
        assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("IS_UNSOLICITED"));
        assertThat(CALLS).doesNotContain("wc_is_unsolicited");
        sgidOnly.close();
    }

    @Test
    void aBufferRefilledByALegacyPollNoLongerOffersTheEfaFieldsOfItsPreviousContents() {
        EfaCompletionQueue q = EfaCompletionQueue.standIn(cq, efadv, all(),
                EnumSet.of(EfaWcFlag.SGID, EfaWcFlag.IS_UNSOLICITED));
        remaining = 1;
        try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(2)) {
            assertThat(q.poll(buffer)).isEqualTo(1);
            assertThat(buffer.get(0).isUnsolicited()).isTrue();
            // what CompletionQueue.pollCqInto does to the buffer after ibv_poll_cq returned 1 (no legacy CQ here)
            buffer.filledByPollCq(1);
            WorkCompletion wc = buffer.get(0);
            assertThatThrownBy(wc::isUnsolicited).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("IS_UNSOLICITED");
            assertThatThrownBy(wc::sgid).isInstanceOf(IllegalStateException.class).hasMessageContaining("SGID");
            assertThatThrownBy(wc::completionTimestamp).isInstanceOf(IllegalStateException.class);
            assertThat(wc.copy().sgid()).isNull();
            assertThat(wc.copy().isUnsolicited()).isFalse();
        }
        q.close();
    }

    @Test
    void aClosedCqThrowsInsteadOfTouchingFreedMemory() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        q.close();
        q.close(); // idempotent
        assertThat(q.isClosed()).isTrue();
        assertThatThrownBy(q::startPoll).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatThrownBy(() -> q.poll(new WorkCompletionBuffer(1))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(q::cqe).isInstanceOf(IllegalStateException.class);
        assertThat(CALLS).isEmpty();
    }

    @Test
    void closeWaitsForTheOwnersPollInFlightAndLaterPollsThrow() throws Exception {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<Throwable> pollerEnd = new java.util.concurrent.atomic.AtomicReference<>();
        remaining = 1;
        Thread poller = new Thread(() -> {
            try (WorkCompletionBuffer b = new WorkCompletionBuffer(4)) {
                while (true) {
                    q.poll(b, parkedHandler(inHandler, letGo));
                }
            } catch (Throwable t) {
                pollerEnd.set(t);
            }
        }, "owner-poller");
        poller.start();
        assertThat(inHandler.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        java.util.concurrent.CompletableFuture<Void> closing = java.util.concurrent.CompletableFuture.runAsync(q::close);
        Thread.sleep(300);
        assertThat(closing).as("close must wait for the poll in flight").isNotDone();
        assertThat(q.isClosed()).isFalse();
        letGo.countDown();
        closing.get(10, java.util.concurrent.TimeUnit.SECONDS);
        poller.join(10_000);
        assertThat(q.isClosed()).isTrue();
        assertThat(pollerEnd.get()).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        // end_poll ran before the CQ was destroyed: the batch was complete when close() went on
        assertThat(CALLS).containsSubsequence("start_poll", "end_poll");
    }

    @Test
    void aSecondPollingThreadWaitsInJavaForTheFirstsBatchAndThenPolls() throws Exception {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
        remaining = 1;
        Thread first = new Thread(() -> {
            try (WorkCompletionBuffer b = new WorkCompletionBuffer(1)) {
                q.poll(b, parkedHandler(inHandler, letGo));
            }
        }, "first-poller");
        first.start();
        assertThat(inHandler.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        CALLS.clear();
        java.util.concurrent.CompletableFuture<Integer> second = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> {
                    try (WorkCompletionBuffer b = new WorkCompletionBuffer(1)) {
                        return q.poll(b, wc -> { });
                    }
                });
        Thread.sleep(300);
        assertThat(second).as("the second poll waits while the first holds the batch").isNotDone();
        assertThat(CALLS).as("and it waits in Java: no start_poll while the first batch is open").isEmpty();
        letGo.countDown();
        assertThat(second.get(10, java.util.concurrent.TimeUnit.SECONDS)).isZero();
        first.join(10_000);
        assertThat(CALLS).containsSubsequence("end_poll", "start_poll");
        q.close();
        assertThat(q.isClosed()).isTrue();
    }

    @Test
    void reEnteringTheCqFromItsOwnHandlerIsRefusedBeforeAnyNativeCall() {
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        List<Throwable> errors = refusalsOfOneCompletion(q, wc -> {
            CALLS.clear();
            try (WorkCompletionBuffer other = new WorkCompletionBuffer(1)) {
                q.poll(other);
            }
        });
        assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("from inside its own poll"));
        assertThat(CALLS).as("no start_poll while the batch is open").doesNotContain("start_poll");
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
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        remaining = 1;
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
        ExtendedCompletionQueue q = ExtendedCompletionQueue.standIn(cq, all());
        List<Throwable> errors = refusalsOfOneCompletion(q, wc -> q.close());
        assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("own poll callback"));
        assertThat(q.isClosed()).isFalse();
        q.close();
        assertThat(q.isClosed()).isTrue();
    }

    /** Polls one stand-in completion and runs {@code action} on it, collecting the IllegalStateException it throws. */
    private static List<Throwable> refusalsOfOneCompletion(ExtendedCompletionQueue q,
            java.util.function.Consumer<WorkCompletion> action) {
        remaining = 1;
        List<Throwable> errors = new ArrayList<>();
        q.poll(new WorkCompletionBuffer(1), wc -> {
            try {
                action.accept(wc);
            } catch (IllegalStateException e) {
                errors.add(e);
            }
        });
        return errors;
    }
}
