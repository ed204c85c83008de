package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * An extended completion queue ({@code struct ibv_cq_ex *}) created by {@code ibv_create_cq_ex}, the static inline
 * verb of verbs.h, reached through {@code verbs_context.create_cq_ex} (EOPNOTSUPP when the provider lacks it, as the
 * C inline does). Polled with the iterator {@code ibv_start_poll} / {@code ibv_next_poll} / {@code ibv_end_poll};
 * fields are read with the {@code ibv_wc_read_*} function pointers of the CQ.
 *
 * <p><b>Iterator rules</b> (enforced): no {@code end_poll} after a failed {@code start_poll}; exactly one
 * {@code end_poll} after a started batch, also when {@code next_poll} fails or the callback throws; the provider's
 * lock is held in between, so nothing else may touch the CQ: a batch runs in the CQ's exclusive slot (see
 * {@link CompletionQueue#poll(WorkCompletionBuffer)}), another thread waits for it in Java, and the same thread polling,
 * resizing, closing or starting another batch of this CQ before {@code end_poll} is refused with
 * {@link IllegalStateException} before any native call.
 *
 * <p><b>Soft-RoCE before rdma-core 55</b> corrupts its consumer index when {@code next_poll} runs into ENOENT and
 * {@code end_poll} follows (the documented drain sequence), handing out phantom completions afterwards. On rxe with an
 * rdma-core older than 59 (detected from libefa's symbols) this class therefore never calls {@code next_poll}: a
 * batch holds one completion ({@link #usesBatchIterator()} is false, {@link #nextPoll()} returns false without a
 * native call), the one pattern that is correct on every provider and version, for the raw iterator too.
 *
 * <p><b>Fields.</b> Only the fields whose {@link WcExFlag} was requested at creation can be read; any other read
 * throws {@link IllegalStateException} without calling the provider (its reader pointer may be NULL).
 */
public class ExtendedCompletionQueue extends CompletionQueue {

    /** How the iterator is driven; see the class comment. */
    enum IteratorMode { AUTO, BATCH, ONE_PER_BATCH }

    private static final int ENOENT = Errno.ENOENT;

    private final long wcFlags;
    private final int createFlags;
    final boolean batchIterator;
    private final Arena arena = Arena.ofShared();
    private final long pollAttrAddress = arena.allocate(Layouts.IBV_POLL_CQ_ATTR).address();
    final MemorySegment scratch16 = Native.unscoped(arena.allocate(16, 8));
    private final MemorySegment startPoll;
    private final MemorySegment nextPoll;
    private final MemorySegment endPoll;
    private final MemorySegment readOpcode;
    private final MemorySegment readVendorErr;
    private final MemorySegment readByteLen;
    private final MemorySegment readImmData;
    private final MemorySegment readQpNum;
    private final MemorySegment readSrcQp;
    private final MemorySegment readWcFlags;
    private final MemorySegment readSlid;
    private final MemorySegment readSl;
    private final MemorySegment readDlidPathBits;
    private final MemorySegment readCompletionTs;
    private final MemorySegment readCvlan;
    private final MemorySegment readFlowTag;
    private final MemorySegment readTmInfo;
    private final MemorySegment readWallclock;
    private final Current current = new Current();
    /** The thread between a successful start_poll and its end_poll (it holds the exclusive slot then), or null. */
    private @Nullable Thread batchThread;
    /** True while that batch was opened by {@link #startPoll()} (the raw iterator), not by a poll method. */
    private boolean rawBatch;

    ExtendedCompletionQueue(@Nullable Context context, MemorySegment cq, CqInitAttributes attributes,
            boolean batchIterator, ProviderCalls calls) {
        super(context, context == null ? "stand-in" : context.deviceName(), cq, attributes.channel(),
                attributes.compVector(), calls);
        this.wcFlags = attributes.wcFlagsMask();
        this.createFlags = CqCreateFlag.mask(attributes.flags());
        var l = Layouts.IBV_CQ_EX;
        this.startPoll = fn(cq, l, "start_poll", -1);
        this.nextPoll = fn(cq, l, "next_poll", -1);
        this.endPoll = fn(cq, l, "end_poll", -1);
        this.readOpcode = fn(cq, l, "read_opcode", -1);
        this.readVendorErr = fn(cq, l, "read_vendor_err", -1);
        this.readWcFlags = fn(cq, l, "read_wc_flags", -1);
        this.readByteLen = fn(cq, l, "read_byte_len", WcExFlag.BYTE_LEN.bit());
        this.readImmData = fn(cq, l, "read_imm_data", WcExFlag.IMM.bit());
        this.readQpNum = fn(cq, l, "read_qp_num", WcExFlag.QP_NUM.bit());
        this.readSrcQp = fn(cq, l, "read_src_qp", WcExFlag.SRC_QP.bit());
        this.readSlid = fn(cq, l, "read_slid", WcExFlag.SLID.bit());
        this.readSl = fn(cq, l, "read_sl", WcExFlag.SL.bit());
        this.readDlidPathBits = fn(cq, l, "read_dlid_path_bits", WcExFlag.DLID_PATH_BITS.bit());
        this.readCompletionTs = fn(cq, l, "read_completion_ts", WcExFlag.COMPLETION_TIMESTAMP.bit());
        this.readCvlan = fn(cq, l, "read_cvlan", WcExFlag.CVLAN.bit());
        this.readFlowTag = fn(cq, l, "read_flow_tag", WcExFlag.FLOW_TAG.bit());
        this.readTmInfo = fn(cq, l, "read_tm_info", WcExFlag.TM_INFO.bit());
        this.readWallclock = fn(cq, l, "read_completion_wallclock_ns",
                WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK.bit());
        this.batchIterator = batchIterator;
    }

    /** Whether to drain with next_poll (see the class comment). */
    static boolean batchIterator(Context context, IteratorMode mode) {
        return switch (mode) {
            case BATCH -> true;
            case ONE_PER_BATCH -> false;
            case AUTO -> !(context.queryDevice().isSoftRoce() && !Rdma.softRoceDrainIsSafe());
        };
    }

    /**
     * A stand-in of the tests and benchmarks: memory laid out as {@code struct ibv_cq_ex} whose iterator and readers
     * are native functions of theirs (a CQ without a device), polled exactly like a provider's CQ; never destroyed
     * natively.
     */
    static ExtendedCompletionQueue standIn(MemorySegment fakeCq, CqInitAttributes attributes, boolean batchIterator,
            MemorySegment destroyFn) {
        for (String f : new String[] {"start_poll", "next_poll", "end_poll"}) {
            if (Native.isNull(fakeCq.get(ADDRESS, Layouts.off(Layouts.IBV_CQ_EX, f)))) {
                throw new IllegalArgumentException("the stand-in's " + f + " is NULL");
            }
        }
        return new ExtendedCompletionQueue(null, fakeCq, attributes, batchIterator,
                new ProviderCalls(MemorySegment.NULL, MemorySegment.NULL, destroyFn));
    }

    /**
     * Checks what the provider returned before any Java object wraps it: the iterator pointers must be set. On
     * failure destroys the CQ and throws.
     */
    static MemorySegment checkIterator(MemorySegment cq, String verb) {
        var l = Layouts.IBV_CQ_EX;
        for (String f : new String[] {"start_poll", "next_poll", "end_poll"}) {
            if (Native.isNull(cq.get(ADDRESS, Layouts.off(l, f)))) {
                try {
                    int ignored = (int) Ibverbs.DESTROY_CQ.invokeExact(cq);
                } catch (Throwable t) {
                    throw new IllegalStateException(t);
                }
                throw new VerbsException(verb, Errno.EOPNOTSUPP, "the provider left " + f + " NULL");
            }
        }
        return cq;
    }

    /** The reader at {@code field}, or NULL when its flag was not requested (never called then). */
    private MemorySegment fn(MemorySegment cq, java.lang.foreign.StructLayout l, String field, long requiredFlag) {
        if (requiredFlag != -1 && (wcFlags & requiredFlag) == 0) {
            return MemorySegment.NULL;
        }
        return cq.get(ADDRESS, Layouts.off(l, field));
    }

    static ExtendedCompletionQueue create(Context context, CqInitAttributes attributes) {
        return create(context, attributes, IteratorMode.AUTO);
    }

    static ExtendedCompletionQueue create(Context context, CqInitAttributes attributes, IteratorMode mode) {
        checkChannel(context, attributes.channel());
        boolean batch = batchIterator(context, mode);
        MemorySegment cq;
        context.acquire();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fn = context.verbsOp(Layouts.VCTX_CREATE_CQ_EX);
            if (Native.isNull(fn)) {
                throw new VerbsException("ibv_create_cq_ex", Errno.EOPNOTSUPP,
                        "the provider of " + context.deviceName() + " has no create_cq_ex");
            }
            MemorySegment attr = fill(a, attributes);
            MemorySegment capture = Native.allocateCapture(a);
            Libc.clearErrno();
            cq = (MemorySegment) Ibverbs.FP_CREATE_CQ_EX.invokeExact(fn, capture, context.handle, attr);
            if (Native.isNull(cq)) {
                throw new VerbsException("ibv_create_cq_ex", Native.errno(capture), describe(context, attributes));
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            context.release();
        }
        return new ExtendedCompletionQueue(context,
                checkIterator(cq.reinterpret(Layouts.IBV_CQ_EX.byteSize()), "ibv_create_cq_ex"), attributes, batch,
                ProviderCalls.of(context));
    }

    static MemorySegment fill(Arena a, CqInitAttributes attributes) {
        var l = Layouts.IBV_CQ_INIT_ATTR_EX;
        MemorySegment attr = a.allocate(l);
        attr.set(JAVA_INT, Layouts.off(l, "cqe"), attributes.cqe());
        attr.set(ADDRESS, Layouts.off(l, "cq_context"), MemorySegment.NULL);
        attr.set(ADDRESS, Layouts.off(l, "channel"),
                attributes.channel() == null ? MemorySegment.NULL : attributes.channel().handle);
        attr.set(JAVA_INT, Layouts.off(l, "comp_vector"), attributes.compVector());
        attr.set(JAVA_LONG, Layouts.off(l, "wc_flags"), attributes.wcFlagsMask());
        attr.set(JAVA_INT, Layouts.off(l, "comp_mask"), attributes.compMask());
        attr.set(JAVA_INT, Layouts.off(l, "flags"), CqCreateFlag.mask(attributes.flags()));
        attr.set(ADDRESS, Layouts.off(l, "parent_domain"),
                attributes.parentDomain() == null ? MemorySegment.NULL : attributes.parentDomain().handle);
        return attr;
    }

    static String describe(Context context, CqInitAttributes a) {
        return "cqe=" + a.cqe() + ", comp_vector=" + a.compVector() + " of " + context.numCompVectors()
                + ", wc_flags=" + a.wcFlags() + " (0x" + Long.toHexString(a.wcFlagsMask()) + "), flags=" + a.flags()
                + ", device " + context.deviceName();
    }

    /** The {@code wc_flags} requested at creation. */
    public long wcFlags() {
        return wcFlags;
    }

    /** True when field {@code flag} was requested at creation and can be read. */
    public boolean provides(WcExFlag flag) {
        return (wcFlags & flag.bit()) != 0;
    }

    /** The {@code flags} given at creation ({@link CqCreateFlag} bits). */
    public int createFlags() {
        return createFlags;
    }

    /** False when this CQ polls one completion per start/end batch (Soft-RoCE before rdma-core 59). */
    public boolean usesBatchIterator() {
        return batchIterator;
    }

    static IllegalStateException notRequested(WcExFlag flag) {
        return new IllegalStateException("work completion field " + flag + " was not requested: create the CQ with "
                + "wc_flags including IBV_WC_EX_WITH_" + flag);
    }

    // ------------------------------------------------------------------ the raw iterator

    /**
     * {@code ibv_start_poll}: starts a batch. Returns false (ENOENT) when the CQ is empty; then no
     * {@link #endPoll()} may follow. After true, {@link #current()} is the first completion and {@link #endPoll()}
     * must be called exactly once, on this thread; until then the CQ is this thread's alone (its exclusive slot):
     * another thread's poll waits, this thread's poll, resize, close or second startPoll() is refused.
     *
     * @throws VerbsException on a provider error (no {@code end_poll} then)
     * @throws IllegalStateException when closed, or when this thread is already inside a poll or batch of this CQ
     */
    public boolean startPoll() {
        enterExclusive("ibv_start_poll");
        int rc;
        try {
            rc = start();
        } catch (RuntimeException | Error e) {
            exitExclusive();
            throw e;
        }
        if (rc == 0) {
            batchThread = Thread.currentThread();
            rawBatch = true;
            return true;
        }
        exitExclusive();
        if (rc == ENOENT) {
            return false;
        }
        throw new VerbsException("ibv_start_poll", rc, describe());
    }

    /**
     * {@code ibv_next_poll}: advances to the next completion. Returns false (ENOENT) when there is none in this batch;
     * call {@link #endPoll()}, a later {@link #startPoll()} finds what arrived since. Where the provider corrupts the CQ
     * on that ENOENT (Soft-RoCE before rdma-core 55, see the class comment) a batch holds one completion: this returns
     * false without calling the provider.
     *
     * @throws VerbsException on a provider error; {@link #endPoll()} must still be called
     * @throws IllegalStateException without a batch started by {@link #startPoll()} on this thread
     */
    public boolean nextPoll() {
        requireRawBatch("ibv_next_poll");
        if (!batchIterator) {
            return false;
        }
        int rc = next();
        if (rc == 0) {
            return true;
        }
        if (rc == ENOENT) {
            return false;
        }
        throw new VerbsException("ibv_next_poll", rc, describe());
    }

    /**
     * {@code ibv_end_poll}: ends the batch opened by a successful {@link #startPoll()} on this thread and frees the CQ
     * for other threads.
     *
     * @throws IllegalStateException without a batch started by {@link #startPoll()} on this thread
     */
    public void endPoll() {
        requireRawBatch("ibv_end_poll");
        batchThread = null;
        rawBatch = false;
        try {
            end();
        } finally {
            exitExclusive();
        }
    }

    private void requireRawBatch(String verb) {
        if (batchThread != Thread.currentThread() || !rawBatch) {
            throw new IllegalStateException(verb + " without a batch started by startPoll() on this thread on "
                    + describe());
        }
    }

    /** The current completion of the open batch: a lazy view, valid until the next {@code next_poll}/{@code end_poll}. */
    public WorkCompletion current() {
        requireRawBatch("reading a completion");
        return current;
    }

    /*
     * Each downcall sits in its own method of a few bytecodes: the JIT inlines methods that small at every call site,
     * where larger ones were left as calls at the sites it judged not hot enough (-XX:+PrintInlining: "callee is too
     * large"), on a path that makes three downcalls per completion on rxe.
     */
    private int start() {
        try {
            return (int) Ibverbs.FP_START_POLL.invokeExact(startPoll, cq, pollAttrAddress);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private int next() {
        return readInt(nextPoll);
    }

    private void end() {
        try {
            Ibverbs.FP_END_POLL.invokeExact(endPoll, cq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    // ------------------------------------------------------------------ polling

    /**
     * Drains up to {@code buffer.capacity()} completions with the iterator, handing each to {@code handler} as a lazy
     * view (fields are read through the provider's readers only when asked for). Allocation-free.
     * (It overrides the legacy poll whole, not a hook inside it: a hook's call site, shared by both kinds, would carry
     * one JIT type profile for both.)
     */
    @Override
    public int poll(WorkCompletionBuffer buffer, CompletionHandler handler) {
        enterExclusive("ibv_start_poll");
        try {
            buffer.claim();
            try {
                return iterate(buffer.capacity(), handler, null);
            } finally {
                buffer.unclaim();
            }
        } finally {
            exitExclusive();
        }
    }

    /**
     * Drains up to {@code buffer.capacity()} completions and copies every field this CQ provides into
     * {@code buffer} (the extended fields included), for batch consumers. Allocation-free.
     */
    @Override
    public int poll(WorkCompletionBuffer buffer) {
        enterExclusive("ibv_start_poll");
        try {
            buffer.claim();
            try {
                int n = iterate(buffer.capacity(), null, buffer);
                buffer.filledByIterator(n, wcFlags, efaFlags());
                return n;
            } finally {
                buffer.unclaim();
            }
        } finally {
            exitExclusive();
        }
    }

    /** {@link EfaWcFlag} bits granted; 0 for a plain extended CQ. */
    long efaFlags() {
        return 0;
    }

    private int iterate(int max, CompletionHandler handler, WorkCompletionBuffer copyTo) {
        // An empty CQ, what a busy poller sees most: one downcall and nothing more. This method stays small enough to
        // be inlined into the poll; the loop of iterateFrom is not.
        int rc = start();
        return rc == ENOENT ? 0 : iterateFrom(rc, max, handler, copyTo);
    }

    /** The iterator from a start_poll that returned {@code rc} (not ENOENT), up to {@code max} completions. */
    private int iterateFrom(int rc, int max, CompletionHandler handler, WorkCompletionBuffer copyTo) {
        int n = 0;
        while (true) {
            if (rc != 0) {
                throw new VerbsException("ibv_start_poll", rc, describe());
            }
            batchThread = Thread.currentThread();
            try {
                deliver(n++, handler, copyTo);
                if (batchIterator) {
                    while (n < max) {
                        rc = next();
                        if (rc == ENOENT) {
                            return n;
                        }
                        if (rc != 0) {
                            throw new VerbsException("ibv_next_poll", rc, describe());
                        }
                        deliver(n++, handler, copyTo);
                    }
                    return n;
                }
            } finally {
                batchThread = null;
                end();
            }
            if (n >= max) {
                return n;
            }
            rc = start();
            if (rc == ENOENT) {
                return n;
            }
        }
    }

    private void deliver(int index, CompletionHandler handler, WorkCompletionBuffer copyTo) {
        if (handler != null) {
            handler.onCompletion(current);
        } else {
            copyCurrent(copyTo, index);
        }
    }

    private void copyCurrent(WorkCompletionBuffer b, int i) {
        // the buffer is claimed by this poll: close() waits for it, so its unscoped aliases stay valid
        MemorySegment wc = b.wcsView;
        MemorySegment ext = b.extView;
        long base = i * Layouts.WC_SIZE;
        long eb = i * WorkCompletionBuffer.EXT_SIZE;
        int status = handle.get(JAVA_INT, Layouts.CQ_EX_STATUS);
        wc.set(JAVA_LONG, base + Layouts.WC_WR_ID, handle.get(JAVA_LONG, Layouts.CQ_EX_WR_ID));
        // Every ibv_wc field is written (read, or 0 when there is no reader or it is not valid on error), one field
        // after the other, rather than zeroing the entry and looping over a table of readers: straight-line code is
        // what the JIT compiles best here (docs/benchmarks.md, "What the profiling changed")
        boolean ok = status == 0;
        wc.set(JAVA_INT, base + Layouts.WC_STATUS, status);
        wc.set(JAVA_INT, base + Layouts.WC_VENDOR_ERR, readVendorErr.address() != 0 ? readInt(readVendorErr) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_QP_NUM, readQpNum.address() != 0 ? readInt(readQpNum) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_OPCODE, ok && readOpcode.address() != 0 ? readInt(readOpcode) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_WC_FLAGS, ok && readWcFlags.address() != 0 ? readInt(readWcFlags) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_BYTE_LEN, ok && readByteLen.address() != 0 ? readInt(readByteLen) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_IMM_DATA, ok && readImmData.address() != 0 ? readInt(readImmData) : 0);
        wc.set(JAVA_INT, base + Layouts.WC_SRC_QP, ok && readSrcQp.address() != 0 ? readInt(readSrcQp) : 0);
        wc.set(JAVA_LONG, base + Layouts.WC_PKEY_INDEX, 0L); // pkey_index, slid, sl, dlid_path_bits: set below if read
        ext.set(JAVA_INT, eb + WorkCompletionBuffer.EXT_SLID32,
                ok && readSlid.address() != 0 ? readInt(readSlid) : 0);
        if (ok && readSl.address() != 0) {
            wc.set(JAVA_BYTE, base + Layouts.WC_SL, readByte(readSl));
        }
        if (ok && readDlidPathBits.address() != 0) {
            wc.set(JAVA_BYTE, base + Layouts.WC_DLID_PATH_BITS, readByte(readDlidPathBits));
        }
        if (!ok) {
            return;
        }
        if (readCompletionTs.address() != 0) {
            ext.set(JAVA_LONG, eb + WorkCompletionBuffer.EXT_COMPLETION_TS, readLong(readCompletionTs));
        }
        if (readWallclock.address() != 0) {
            ext.set(JAVA_LONG, eb + WorkCompletionBuffer.EXT_WALLCLOCK, readLong(readWallclock));
        }
        if (readCvlan.address() != 0) {
            ext.set(JAVA_SHORT, eb + WorkCompletionBuffer.EXT_CVLAN, readShort(readCvlan));
        }
        if (readFlowTag.address() != 0) {
            ext.set(JAVA_INT, eb + WorkCompletionBuffer.EXT_FLOW_TAG, readInt(readFlowTag));
        }
        if (readTmInfo.address() != 0) {
            readTm(scratch16);
            ext.set(JAVA_LONG, eb + WorkCompletionBuffer.EXT_TM_TAG, scratch16.get(JAVA_LONG, 0));
            ext.set(JAVA_INT, eb + WorkCompletionBuffer.EXT_TM_PRIV, scratch16.get(JAVA_INT, 8));
        }
        copyEfa(ext, eb);
    }

    /** EFA fields into the buffer's ext area; nothing for a plain extended CQ. */
    void copyEfa(MemorySegment ext, long eb) {
    }

    // ------------------------------------------------------------------ readers

    final int readInt(MemorySegment fn) {
        try {
            return (int) Ibverbs.FP_INT_OF_CQ.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    final long readLong(MemorySegment fn) {
        try {
            return (long) Ibverbs.FP_LONG_OF_CQ.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    final short readShort(MemorySegment fn) {
        try {
            return (short) Ibverbs.FP_SHORT_OF_CQ.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    final byte readByte(MemorySegment fn) {
        try {
            return (byte) Ibverbs.FP_BYTE_OF_CQ.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    final void readTm(MemorySegment out) {
        try {
            Ibverbs.FP_READ_TM_INFO.invokeExact(readTmInfo, cq, out.address());
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** EFA hooks of the lazy view. */
    @Nullable Gid sgidOfCurrent() {
        throw EfaCompletionQueue.notGranted(EfaWcFlag.SGID);
    }

    boolean unsolicitedOfCurrent() {
        throw EfaCompletionQueue.notGranted(EfaWcFlag.IS_UNSOLICITED);
    }

    @Override
    void destroyed() {
        arena.close();
    }

    /** The lazy view of the iterator's current completion. */
    private final class Current implements WorkCompletion {

        private MemorySegment reader(MemorySegment fn, WcExFlag flag) {
            if (batchThread != Thread.currentThread() || fn.address() == 0) {
                throw unreadable(fn, flag); // out of line: keeps this method small enough to inline everywhere
            }
            return fn;
        }

        private RuntimeException unreadable(MemorySegment fn, WcExFlag flag) {
            if (batchThread != Thread.currentThread()) {
                return new IllegalStateException("an extended-CQ completion was read outside its poll callback");
            }
            return flag == null ? new IllegalStateException("the provider has no reader for this field")
                    : notRequested(flag);
        }

        private void requireCallback() {
            if (batchThread != Thread.currentThread()) {
                throw new IllegalStateException("an extended-CQ completion was read outside its poll callback");
            }
        }

        @Override
        public long wrId() {
            requireCallback();
            return handle.get(JAVA_LONG, Layouts.CQ_EX_WR_ID);
        }

        @Override
        public int statusCode() {
            requireCallback();
            return handle.get(JAVA_INT, Layouts.CQ_EX_STATUS);
        }

        @Override
        public int opcodeCode() {
            return readInt(reader(readOpcode, null));
        }

        @Override
        public int vendorErr() {
            return readInt(reader(readVendorErr, null));
        }

        @Override
        public int byteLen() {
            return readInt(reader(readByteLen, WcExFlag.BYTE_LEN));
        }

        @Override
        public int immData() {
            return Integer.reverseBytes(readInt(reader(readImmData, WcExFlag.IMM)));
        }

        @Override
        public int invalidatedRkey() {
            return readInt(reader(readImmData, WcExFlag.IMM));
        }

        @Override
        public int qpNum() {
            return readInt(reader(readQpNum, WcExFlag.QP_NUM));
        }

        @Override
        public int srcQp() {
            return readInt(reader(readSrcQp, WcExFlag.SRC_QP));
        }

        @Override
        public int wcFlags() {
            return readInt(reader(readWcFlags, null));
        }

        @Override
        public int pkeyIndex() {
            throw new IllegalStateException("pkey_index is not available from an extended CQ "
                    + "(verbs.h has no ibv_wc_read_pkey_index)");
        }

        @Override
        public int slid() {
            return readInt(reader(readSlid, WcExFlag.SLID));
        }

        @Override
        public int sl() {
            return readByte(reader(readSl, WcExFlag.SL)) & 0xff;
        }

        @Override
        public int dlidPathBits() {
            return readByte(reader(readDlidPathBits, WcExFlag.DLID_PATH_BITS)) & 0xff;
        }

        @Override
        public long completionTimestamp() {
            return readLong(reader(readCompletionTs, WcExFlag.COMPLETION_TIMESTAMP));
        }

        @Override
        public long completionWallclockNanos() {
            return readLong(reader(readWallclock, WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK));
        }

        @Override
        public int cvlan() {
            return readShort(reader(readCvlan, WcExFlag.CVLAN)) & 0xffff;
        }

        @Override
        public int flowTag() {
            return readInt(reader(readFlowTag, WcExFlag.FLOW_TAG));
        }

        @Override
        public TmInfo tmInfo() {
            reader(readTmInfo, WcExFlag.TM_INFO);
            readTm(scratch16);
            return new TmInfo(scratch16.get(JAVA_LONG, 0), scratch16.get(JAVA_INT, 8));
        }

        @Override
        public @Nullable Gid sgid() {
            reader(startPoll, null);
            return sgidOfCurrent();
        }

        @Override
        public boolean isUnsolicited() {
            reader(startPoll, null);
            return unsolicitedOfCurrent();
        }

        /*
         * Overridden, not inherited: a default method's type profile is shared by every WorkCompletion class, so a
         * JIT-compiled caller that only ever sees this class would still dispatch statusCode() & co. virtually once
         * another class (legacy view, extended view, snapshot) has been used anywhere in the JVM.
         */
        @Override
        public boolean isSuccess() {
            return statusCode() == 0;
        }

        @Override
        public WcStatus status() {
            return WcStatus.of(statusCode());
        }

        @Override
        public WcOpcode opcode() {
            return WcOpcode.of(opcodeCode());
        }

        @Override
        public boolean hasFlag(WcFlag flag) {
            return flag.isSet(wcFlags());
        }

        @Override
        public WorkCompletionSnapshot copy() {
            return WorkCompletionSnapshot.of(this, wcFlags, false, efaFlags());
        }

        @Override
        public String toString() {
            return "WorkCompletion[wr_id=" + wrId() + ", status=" + status() + "]";
        }
    }
}
