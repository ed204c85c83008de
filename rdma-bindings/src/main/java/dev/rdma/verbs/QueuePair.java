package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A reliable-connected queue pair ({@code struct ibv_qp *}, {@code ibv_create_qp} / {@code ibv_modify_qp} /
 * {@code ibv_destroy_qp}): enough to produce real completions. {@link #postSend} and {@link #postRecv} are the
 * inline verbs of verbs.h, called through {@code qp->context->ops}; each uses a work request preallocated in native
 * memory, so posting allocates nothing. Posting is serialised per direction (one lock for sends, one for receives).
 */
public final class QueuePair extends NativeObject {

    /**
     * {@code struct ibv_qp_init_attr} of an RC QP.
     *
     * @param sendCq CQ of the send queue
     * @param recvCq CQ of the receive queue
     * @param maxSendWr outstanding sends
     * @param maxRecvWr outstanding receives
     * @param signalAll {@code sq_sig_all}: every send completes, not only those posted signaled
     */
    public record Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
            boolean signalAll) {
        public Attributes {
            Objects.requireNonNull(sendCq, "sendCq");
            Objects.requireNonNull(recvCq, "recvCq");
        }
    }

    /** {@code enum ibv_qp_state}. */
    public enum State { RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN }

    /** {@code enum ibv_wr_opcode} of the sends this class posts. */
    public enum SendOpcode {
        RDMA_WRITE(0), RDMA_WRITE_WITH_IMM(1), SEND(2), SEND_WITH_IMM(3), RDMA_READ(4);

        final int code;

        SendOpcode(int code) {
            this.code = code;
        }
    }

    static final int IBV_QPT_RC = 2;
    static final int QP_STATE = 1;
    static final int QP_ACCESS_FLAGS = 1 << 3;
    static final int QP_PKEY_INDEX = 1 << 4;
    static final int QP_PORT = 1 << 5;
    static final int QP_AV = 1 << 7;
    static final int QP_PATH_MTU = 1 << 8;
    static final int QP_TIMEOUT = 1 << 9;
    static final int QP_RETRY_CNT = 1 << 10;
    static final int QP_RNR_RETRY = 1 << 11;
    static final int QP_RQ_PSN = 1 << 12;
    static final int QP_MAX_QP_RD_ATOMIC = 1 << 13;
    static final int QP_MIN_RNR_TIMER = 1 << 15;
    static final int QP_SQ_PSN = 1 << 16;
    static final int QP_MAX_DEST_RD_ATOMIC = 1 << 17;
    static final int QP_DEST_QPN = 1 << 20;
    static final int SEND_SIGNALED = 1 << 1;
    static final int SEND_SOLICITED = 1 << 2;

    private final ProtectionDomain pd;
    private final Attributes attributes;
    private final int qpNum;
    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;
    private final Arena arena = Arena.ofShared();
    // global-scope aliases (Native.unscoped): posting passes them to native code without a session acquire
    private final MemorySegment sendWr = Native.unscoped(arena.allocate(Layouts.IBV_SEND_WR));
    private final MemorySegment sendSge = Native.unscoped(arena.allocate(Layouts.IBV_SGE));
    private final MemorySegment badSend = Native.unscoped(arena.allocate(ADDRESS));
    private final MemorySegment recvWr = Native.unscoped(arena.allocate(Layouts.IBV_RECV_WR));
    private final MemorySegment recvSge = Native.unscoped(arena.allocate(Layouts.IBV_SGE));
    private final MemorySegment badRecv = Native.unscoped(arena.allocate(ADDRESS));
    private final Object sendLock = new Object();
    private final Object recvLock = new Object();

    private static final long SWR_WR_ID = Layouts.off(Layouts.IBV_SEND_WR, "wr_id");
    private static final long SWR_SG_LIST = Layouts.off(Layouts.IBV_SEND_WR, "sg_list");
    private static final long SWR_NUM_SGE = Layouts.off(Layouts.IBV_SEND_WR, "num_sge");
    private static final long SWR_OPCODE = Layouts.off(Layouts.IBV_SEND_WR, "opcode");
    private static final long SWR_SEND_FLAGS = Layouts.off(Layouts.IBV_SEND_WR, "send_flags");
    private static final long SWR_IMM = Layouts.off(Layouts.IBV_SEND_WR, "anon_imm", "imm_data");
    private static final long SWR_REMOTE_ADDR = Layouts.off(Layouts.IBV_SEND_WR, "wr", "rdma", "remote_addr");
    private static final long SWR_RKEY = Layouts.off(Layouts.IBV_SEND_WR, "wr", "rdma", "rkey");
    private static final long RWR_WR_ID = Layouts.off(Layouts.IBV_RECV_WR, "wr_id");
    private static final long RWR_SG_LIST = Layouts.off(Layouts.IBV_RECV_WR, "sg_list");
    private static final long RWR_NUM_SGE = Layouts.off(Layouts.IBV_RECV_WR, "num_sge");
    private static final long SGE_ADDR = Layouts.off(Layouts.IBV_SGE, "addr");
    private static final long SGE_LENGTH = Layouts.off(Layouts.IBV_SGE, "length");
    private static final long SGE_LKEY = Layouts.off(Layouts.IBV_SGE, "lkey");

    private QueuePair(ProtectionDomain pd, MemorySegment qp, Attributes attributes) {
        super(qp, pd);
        this.pd = pd;
        this.attributes = attributes;
        this.qpNum = qp.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "qp_num"));
        MemorySegment ctx = pd.context().handle;
        this.postSendFn = ctx.get(ADDRESS, Layouts.CONTEXT_POST_SEND);
        this.postRecvFn = ctx.get(ADDRESS, Layouts.CONTEXT_POST_RECV);
        sendWr.set(ADDRESS, SWR_SG_LIST, sendSge);
        sendWr.set(JAVA_INT, SWR_NUM_SGE, 1);
        recvWr.set(ADDRESS, RWR_SG_LIST, recvSge);
        recvWr.set(JAVA_INT, RWR_NUM_SGE, 1);
    }

    static QueuePair create(ProtectionDomain pd, Attributes attributes) {
        if (attributes.sendCq().context() != pd.context() || attributes.recvCq().context() != pd.context()) {
            throw new IllegalArgumentException("the CQs of a QP must belong to the PD's context");
        }
        if (Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_SEND))
                || Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_RECV))) {
            throw new VerbsException("ibv_create_qp", Errno.EOPNOTSUPP, "the provider has no post_send/post_recv");
        }
        pd.acquire();
        attributes.sendCq().acquire();
        attributes.recvCq().acquire();
        try (Arena a = Arena.ofConfined()) {
            var l = Layouts.IBV_QP_INIT_ATTR;
            MemorySegment init = a.allocate(l);
            init.set(ADDRESS, Layouts.off(l, "send_cq"), attributes.sendCq().handle);
            init.set(ADDRESS, Layouts.off(l, "recv_cq"), attributes.recvCq().handle);
            init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_wr"), attributes.maxSendWr());
            init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_wr"), attributes.maxRecvWr());
            init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_sge"), 1);
            init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_sge"), 1);
            init.set(JAVA_INT, Layouts.off(l, "qp_type"), IBV_QPT_RC);
            init.set(JAVA_INT, Layouts.off(l, "sq_sig_all"), attributes.signalAll() ? 1 : 0);
            MemorySegment capture = Native.allocateCapture(a);
            MemorySegment qp = (MemorySegment) Ibverbs.CREATE_QP.invokeExact(capture, pd.handle, init);
            if (Native.isNull(qp)) {
                throw new VerbsException("ibv_create_qp", Native.errno(capture), attributes.toString());
            }
            return new QueuePair(pd, qp.reinterpret(Layouts.IBV_QP.byteSize()), attributes);
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            attributes.recvCq().release();
            attributes.sendCq().release();
            pd.release();
        }
    }

    /** {@code qp->qp_num}. */
    public int qpNum() {
        return qpNum;
    }

    public Attributes attributes() {
        return attributes;
    }

    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** {@code qp->state} as last known to libibverbs. */
    public State state() {
        acquire();
        try {
            int s = handle.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "state"));
            return s >= 0 && s < State.UNKNOWN.ordinal() ? State.values()[s] : State.UNKNOWN;
        } finally {
            release();
        }
    }

    @Override
    String describe() {
        return "QueuePair[qpn " + qpNum + "]";
    }

    /**
     * Moves the QP through INIT, RTR and RTS connected to {@code destQpNum} at {@code destGid} over RoCE
     * ({@code is_global=1}, the local GID at {@code sgidIndex}). {@code destQpNum == qpNum()} and the local GID make a
     * loopback connection to itself.
     */
    public void connect(int port, int sgidIndex, Gid destGid, int destQpNum) {
        PortAttributes portAttr = pd.context().queryPort(port);
        int mtuCode = Integer.numberOfTrailingZeros(portAttr.activeMtu()) - 7;
        acquire();
        try (Arena a = Arena.ofConfined()) {
            var l = Layouts.IBV_QP_ATTR;
            MemorySegment attr = a.allocate(l);
            attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.INIT.ordinal());
            attr.set(JAVA_SHORT, Layouts.off(l, "pkey_index"), (short) 0);
            attr.set(JAVA_BYTE, Layouts.off(l, "port_num"), (byte) port);
            attr.set(JAVA_INT, Layouts.off(l, "qp_access_flags"),
                    MemoryRegion.Access.LOCAL_WRITE.bit | MemoryRegion.Access.REMOTE_WRITE.bit
                            | MemoryRegion.Access.REMOTE_READ.bit);
            modify(attr, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS, "INIT");

            attr.fill((byte) 0);
            attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTR.ordinal());
            attr.set(JAVA_INT, Layouts.off(l, "path_mtu"), mtuCode);
            attr.set(JAVA_INT, Layouts.off(l, "dest_qp_num"), destQpNum);
            attr.set(JAVA_INT, Layouts.off(l, "rq_psn"), 0);
            attr.set(JAVA_BYTE, Layouts.off(l, "max_dest_rd_atomic"), (byte) 1);
            attr.set(JAVA_BYTE, Layouts.off(l, "min_rnr_timer"), (byte) 12);
            attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "is_global"), (byte) 1);
            attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "port_num"), (byte) port);
            attr.set(JAVA_SHORT, Layouts.off(l, "ah_attr", "dlid"), (short) portAttr.lid());
            MemorySegment.copy(MemorySegment.ofArray(destGid.raw()), 0, attr,
                    Layouts.off(l, "ah_attr", "grh", "dgid"), 16);
            attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "grh", "sgid_index"), (byte) sgidIndex);
            attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "grh", "hop_limit"), (byte) 1);
            modify(attr, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC
                    | QP_MIN_RNR_TIMER, "RTR");

            attr.fill((byte) 0);
            attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTS.ordinal());
            attr.set(JAVA_BYTE, Layouts.off(l, "timeout"), (byte) 14);
            attr.set(JAVA_BYTE, Layouts.off(l, "retry_cnt"), (byte) 7);
            attr.set(JAVA_BYTE, Layouts.off(l, "rnr_retry"), (byte) 7);
            attr.set(JAVA_INT, Layouts.off(l, "sq_psn"), 0);
            attr.set(JAVA_BYTE, Layouts.off(l, "max_rd_atomic"), (byte) 1);
            modify(attr, QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC,
                    "RTS");
        } finally {
            release();
        }
    }

    /** {@code ibv_modify_qp} to {@link State#ERR}: every outstanding work request flushes with WR_FLUSH_ERR. */
    public void moveToError() {
        acquire();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
            attr.set(JAVA_INT, Layouts.off(Layouts.IBV_QP_ATTR, "qp_state"), State.ERR.ordinal());
            modify(attr, QP_STATE, "ERR");
        } finally {
            release();
        }
    }

    private void modify(MemorySegment attr, int mask, String to) {
        try {
            int rc = (int) Ibverbs.MODIFY_QP.invokeExact(handle, attr, mask);
            if (rc != 0) {
                throw new VerbsException("ibv_modify_qp", rc, describe() + " to " + to);
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        }
    }

    /**
     * {@code ibv_post_send} of one SEND or SEND_WITH_IMM of {@code length} bytes at {@code offset} of {@code mr}.
     *
     * @param immData immediate data in host order (sent in network order), for {@link SendOpcode#SEND_WITH_IMM}
     * @param signaled request a completion ({@code IBV_SEND_SIGNALED})
     */
    public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
            boolean signaled) {
        postSend(wrId, mr, offset, length, opcode, immData, signaled, false, 0, 0);
    }

    /** {@code ibv_post_send} of any {@link SendOpcode}; {@code remoteAddr}/{@code rkey} for RDMA operations. */
    public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
            boolean signaled, boolean solicited, long remoteAddr, int rkey) {
        checkRange(mr, offset, length);
        acquire();
        try {
            synchronized (sendLock) {
                sendSge.set(JAVA_LONG, SGE_ADDR, mr.bufferAddress() + offset);
                sendSge.set(JAVA_INT, SGE_LENGTH, length);
                sendSge.set(JAVA_INT, SGE_LKEY, mr.lkey());
                sendWr.set(JAVA_LONG, SWR_WR_ID, wrId);
                sendWr.set(JAVA_INT, SWR_OPCODE, opcode.code);
                sendWr.set(JAVA_INT, SWR_SEND_FLAGS, (signaled ? SEND_SIGNALED : 0) | (solicited ? SEND_SOLICITED : 0));
                sendWr.set(JAVA_INT, SWR_IMM, Integer.reverseBytes(immData));
                sendWr.set(JAVA_LONG, SWR_REMOTE_ADDR, remoteAddr);
                sendWr.set(JAVA_INT, SWR_RKEY, rkey);
                int rc = (int) Ibverbs.FP_POST.invokeExact(postSendFn, handle, sendWr, badSend);
                if (rc != 0) {
                    throw new VerbsException("ibv_post_send", rc, describe() + " wr_id " + wrId);
                }
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            release();
        }
    }

    /** {@code ibv_post_recv} of one receive of up to {@code length} bytes at {@code offset} of {@code mr}. */
    public void postRecv(long wrId, MemoryRegion mr, long offset, int length) {
        checkRange(mr, offset, length);
        acquire();
        try {
            synchronized (recvLock) {
                recvSge.set(JAVA_LONG, SGE_ADDR, mr.bufferAddress() + offset);
                recvSge.set(JAVA_INT, SGE_LENGTH, length);
                recvSge.set(JAVA_INT, SGE_LKEY, mr.lkey());
                recvWr.set(JAVA_LONG, RWR_WR_ID, wrId);
                int rc = (int) Ibverbs.FP_POST.invokeExact(postRecvFn, handle, recvWr, badRecv);
                if (rc != 0) {
                    throw new VerbsException("ibv_post_recv", rc, describe() + " wr_id " + wrId);
                }
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            release();
        }
    }

    private static void checkRange(MemoryRegion mr, long offset, int length) {
        if (offset < 0 || length < 0 || offset + length > mr.buffer().byteSize()) {
            throw new IndexOutOfBoundsException("offset " + offset + " + length " + length + " outside the "
                    + mr.buffer().byteSize() + "-byte memory region");
        }
    }

    @Override
    void destroy() {
        Native.destroyVerb(Ibverbs.DESTROY_QP, handle, "ibv_destroy_qp", describe());
        arena.close();
    }
}
