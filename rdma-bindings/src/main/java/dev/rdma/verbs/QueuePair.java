package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A queue pair ({@code struct ibv_qp *}, {@code ibv_create_qp} / {@code ibv_modify_qp} /
 * {@code ibv_destroy_qp}), reliable-connected ({@link Type#RC}) or unreliable datagram
 * ({@link Type#UD}). {@link #postSend} and {@link #postRecv} are the inline verbs of
 * verbs.h, called through {@code qp->context->ops}; each uses a work request preallocated
 * in native memory, so posting allocates nothing. Posting is serialised per direction
 * (one lock for sends, one for receives), and holds the memory region (and the address
 * handle of a UD send) open for the duration of the call: a closed one is refused with
 * {@link IllegalStateException} before anything is posted.
 *
 * <p>
 * <b>RC</b>: {@link #connect(int, int, Gid, int, ConnectionParameters)} moves the QP
 * through INIT, RTR and RTS connected to one remote QP. <b>UD</b>:
 * {@link #activate(int, int, int, int)} moves it to RTS with a Q_Key, and each send names
 * its destination with an {@link AddressHandle}, a QP number and a Q_Key. A UD receive
 * buffer must hold {@value #GRH_BYTES} bytes of GRH in front of the payload: the provider
 * writes the Global Route Header (on RoCE v2 over IPv4, the IPv4 header in its last 20
 * bytes) there, the payload follows at offset {@value #GRH_BYTES}, and the completion's
 * {@code byte_len} counts both.
 *
 * <p>
 * <b>Closing inside a poll.</b> {@link #close()} ({@code ibv_destroy_qp}; also through
 * the close of its protection domain or context) is refused with
 * {@link IllegalStateException}, before any native call, on a thread that is inside an
 * iterator batch of this QP's send or receive CQ: in the handler of
 * {@link ExtendedCompletionQueue#poll(WorkCompletionBuffer, CompletionHandler)} or
 * between {@link ExtendedCompletionQueue#startPoll()} and
 * {@link ExtendedCompletionQueue#endPoll()}. The provider holds the CQ's spinlock from
 * {@code ibv_start_poll} to {@code ibv_end_poll} (mlx5, efa, rxe), and
 * {@code ibv_destroy_qp} takes it to clean the QP's completions off its CQs
 * (mlx5_lock_cqs; mlx4, efa and irdma alike): the thread would spin for ever. (On mlx5
 * with MLX5_SINGLE_THREADED=1 the provider aborts the process instead; a CQ created
 * {@link CqCreateFlag#SINGLE_THREADED} takes no lock, and the destroy would clean the CQ
 * under the open iterator: refused all the same.) Close the QP after the poll returned,
 * or after {@code endPoll()}. A close on another thread is not refused: it waits for the
 * batch to end (on the provider's CQ lock; on a {@code SINGLE_THREADED} CQ, which has
 * none, in the CQ's exclusive slot, at most 10 s; rxe's destroy does not touch the CQ and
 * need not wait), so a handler must not wait for that thread. Allowed inside a batch:
 * {@link #moveToError()} (mlx5 cleans the CQs only on a move to RESET, which this class
 * never makes), posting, and closing a QP whose CQs are not in a batch on this thread,
 * and closing this QP inside the handler of a legacy CQ's poll ({@code ibv_poll_cq}
 * released the lock before the handler runs).
 */
public final class QueuePair extends NativeObject {

	/** {@code enum ibv_qp_type} of the QPs this class creates. */
	public enum Type {

		/** {@code IBV_QPT_RC}: reliable connected. */
		RC(2),
		/** {@code IBV_QPT_UD}: unreliable datagram. */
		UD(4);

		final int code;

		Type(int code) {
			this.code = code;
		}

	}

	/**
	 * {@code struct ibv_qp_init_attr}.
	 *
	 * @param sendCq CQ of the send queue
	 * @param recvCq CQ of the receive queue
	 * @param maxSendWr outstanding sends
	 * @param maxRecvWr outstanding receives
	 * @param signalAll {@code sq_sig_all}: every send completes, not only those posted
	 * signaled
	 * @param type {@code qp_type}
	 */
	public record Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
			boolean signalAll, Type type) {
		public Attributes {
			Objects.requireNonNull(sendCq, "sendCq");
			Objects.requireNonNull(recvCq, "recvCq");
			Objects.requireNonNull(type, "type");
		}

		/** The attributes of an RC QP. */
		public Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
				boolean signalAll) {
			this(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, Type.RC);
		}

		public Attributes withType(Type type) {
			return new Attributes(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, type);
		}
	}

	/**
	 * The parameters of an RC connection ({@code struct ibv_qp_attr} of the RTR and RTS
	 * transitions). Immutable; {@link #DEFAULTS} are the values of
	 * {@link #connect(int, int, Gid, int)} (rdma-core's {@code ibv_rc_pingpong}'s except
	 * the path MTU and the PSNs, see there), and each {@code withX} returns a copy with
	 * one value changed. Every value is range-checked here
	 * ({@link IllegalArgumentException} naming the parameter); the path MTU is also
	 * checked against the port's active MTU by {@code connect}.
	 *
	 * @param pathMtu {@code path_mtu} in bytes: 256, 512, 1024, 2048 or 4096, at most the
	 * port's active MTU; or {@link #ACTIVE_MTU} (0) for the port's active MTU
	 * @param sqPsn {@code sq_psn}: the first PSN this QP sends, 24 bits
	 * @param rqPsn {@code rq_psn}: the first PSN this QP expects, i.e. the remote QP's
	 * {@code sqPsn}, 24 bits
	 * @param timeout {@code timeout}: local ACK timeout, 4.096 us * 2^timeout (0 =
	 * infinite), 0..31
	 * @param retryCount {@code retry_cnt}: retries after a timeout, 0..7
	 * @param rnrRetry {@code rnr_retry}: retries after an RNR NAK (no receive posted),
	 * 0..7, 7 = infinite
	 * @param minRnrTimer {@code min_rnr_timer}: the RNR NAK timer this QP asks its sender
	 * to wait (encoded), 0..31
	 * @param maxRdAtomic {@code max_rd_atomic}: RDMA reads and atomics outstanding as
	 * initiator, 0..255
	 * @param maxDestRdAtomic {@code max_dest_rd_atomic}: the same as responder, 0..255
	 * @param hopLimit {@code ah_attr.grh.hop_limit}, 0..255
	 * @param serviceLevel {@code ah_attr.sl}, 0..15
	 */
	public record ConnectionParameters(int pathMtu, int sqPsn, int rqPsn, int timeout, int retryCount, int rnrRetry,
			int minRnrTimer, int maxRdAtomic, int maxDestRdAtomic, int hopLimit, int serviceLevel) {

		/** {@link #pathMtu()} of the port's active MTU. */
		public static final int ACTIVE_MTU = 0;

		/** The largest packet sequence number (PSNs are 24 bits). */
		public static final int MAX_PSN = (1 << 24) - 1;

		/**
		 * The values of {@link QueuePair#connect(int, int, Gid, int)}. As rdma-core's
		 * {@code ibv_rc_pingpong} sets them ({@code pp_connect_ctx}): timeout 14,
		 * retry_cnt 7, rnr_retry 7, min_rnr_timer 12, max_rd_atomic 1, max_dest_rd_atomic
		 * 1, hop limit 1, SL 0 (its {@code -l} default). Not {@code ibv_rc_pingpong}'s:
		 * the path MTU is {@link #ACTIVE_MTU}, the local port's active MTU
		 * ({@code ibv_rc_pingpong} uses {@code IBV_MTU_1024} unless {@code -m} says
		 * otherwise), and both PSNs are 0 ({@code ibv_rc_pingpong} sends from a random
		 * 24-bit PSN, {@code lrand48() & 0xffffff}, and expects the peer's).
		 * {@link dev.rdma.verbs.exchange.ExchangeOptions#defaults()} has
		 * {@code ibv_rc_pingpong}'s path MTU 1024 and a random PSN.
		 */
		public static final ConnectionParameters DEFAULTS = new ConnectionParameters(ACTIVE_MTU, 0, 0, 14, 7, 7, 12, 1,
				1, 1, 0);

		public ConnectionParameters {
			if (pathMtu != ACTIVE_MTU && (pathMtu < 256 || pathMtu > 4096 || Integer.bitCount(pathMtu) != 1)) {
				throw new IllegalArgumentException("pathMtu (path_mtu) must be 256, 512, 1024, 2048 or 4096 (or 0 for "
						+ "the port's active MTU), got " + pathMtu);
			}
			Arguments.requireRange("sqPsn (sq_psn)", sqPsn, 0, MAX_PSN);
			Arguments.requireRange("rqPsn (rq_psn)", rqPsn, 0, MAX_PSN);
			Arguments.requireRange("timeout", timeout, 0, 31);
			Arguments.requireRange("retryCount (retry_cnt)", retryCount, 0, 7);
			Arguments.requireRange("rnrRetry (rnr_retry)", rnrRetry, 0, 7);
			Arguments.requireRange("minRnrTimer (min_rnr_timer)", minRnrTimer, 0, 31);
			Arguments.requireRange("maxRdAtomic (max_rd_atomic)", maxRdAtomic, 0, 255);
			Arguments.requireRange("maxDestRdAtomic (max_dest_rd_atomic)", maxDestRdAtomic, 0, 255);
			Arguments.requireRange("hopLimit (hop_limit)", hopLimit, 0, 255);
			Arguments.requireRange("serviceLevel (sl)", serviceLevel, 0, 15);
		}

		public static ConnectionParameters defaults() {
			return DEFAULTS;
		}

		public ConnectionParameters withPathMtu(int pathMtu) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withSqPsn(int sqPsn) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withRqPsn(int rqPsn) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withTimeout(int timeout) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withRetryCount(int retryCount) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withRnrRetry(int rnrRetry) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withMinRnrTimer(int minRnrTimer) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withMaxRdAtomic(int maxRdAtomic) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withMaxDestRdAtomic(int maxDestRdAtomic) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withHopLimit(int hopLimit) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		public ConnectionParameters withServiceLevel(int serviceLevel) {
			return new ConnectionParameters(pathMtu, sqPsn, rqPsn, timeout, retryCount, rnrRetry, minRnrTimer,
					maxRdAtomic, maxDestRdAtomic, hopLimit, serviceLevel);
		}

		/**
		 * The {@code enum ibv_mtu} code of the path MTU on a port whose active MTU is
		 * {@code activeMtu} bytes.
		 * @throws IllegalArgumentException when {@link #pathMtu()} exceeds
		 * {@code activeMtu}
		 */
		int pathMtuCode(int activeMtu, String port) {
			int mtu = pathMtu == ACTIVE_MTU ? activeMtu : pathMtu;
			if (mtu > activeMtu) {
				throw new IllegalArgumentException(
						"pathMtu (path_mtu) " + pathMtu + " exceeds the active MTU " + activeMtu + " of " + port);
			}
			return Integer.numberOfTrailingZeros(mtu) - 7;
		}
	}

	/**
	 * Bytes of Global Route Header in front of the payload of every UD receive buffer.
	 */
	public static final int GRH_BYTES = 40;

	/** {@code enum ibv_qp_state}. */
	public enum State {

		RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN

	}

	/** {@code enum ibv_wr_opcode} of the sends this class posts. */
	public enum SendOpcode {

		RDMA_WRITE(0), RDMA_WRITE_WITH_IMM(1), SEND(2), SEND_WITH_IMM(3), RDMA_READ(4);

		final int code;

		SendOpcode(int code) {
			this.code = code;
		}

	}

	static final int QP_STATE = 1;
	static final int QP_ACCESS_FLAGS = 1 << 3;
	static final int QP_PKEY_INDEX = 1 << 4;
	static final int QP_PORT = 1 << 5;
	static final int QP_QKEY = 1 << 6;
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

	static {
		// the connection manager (dev.rdma.verbs.cm) moves a QP with the attributes
		// rdma_init_qp_attr filled
		dev.rdma.verbs.ffm.QueuePairAccess.Holder
			.install((qp, attr, mask, what) -> ((QueuePair) qp).modifyAcquired(attr, mask, what));
	}

	private final ProtectionDomain pd;

	private final Attributes attributes;

	private final boolean ud;

	private final int qpNum;

	private final MemorySegment postSendFn;

	private final MemorySegment postRecvFn;

	private final Arena arena = Arena.ofShared();

	// global-scope aliases (Native.unscoped): posting passes them to native code without
	// a session acquire
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

	private static final long SWR_UD_AH = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "ah");

	private static final long SWR_UD_REMOTE_QPN = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "remote_qpn");

	private static final long SWR_UD_REMOTE_QKEY = Layouts.off(Layouts.IBV_SEND_WR, "wr", "ud", "remote_qkey");

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
		this.ud = attributes.type() == Type.UD;
		this.qpNum = qp.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "qp_num"));
		MemorySegment ctx = pd.context().handle;
		this.postSendFn = ctx.get(ADDRESS, Layouts.CONTEXT_POST_SEND);
		this.postRecvFn = ctx.get(ADDRESS, Layouts.CONTEXT_POST_RECV);
		sendWr.set(ADDRESS, SWR_SG_LIST, sendSge);
		sendWr.set(JAVA_INT, SWR_NUM_SGE, 1);
		recvWr.set(ADDRESS, RWR_SG_LIST, recvSge);
		recvWr.set(JAVA_INT, RWR_NUM_SGE, 1);
		// the CQs refuse to close while a QP uses them (ibv_destroy_cq's EBUSY, foreseen)
		attributes.sendCq().addUser(this);
		attributes.recvCq().addUser(this);
	}

	static QueuePair create(ProtectionDomain pd, Attributes attributes) {
		if (attributes.sendCq().context() != pd.context() || attributes.recvCq().context() != pd.context()) {
			throw new IllegalArgumentException("the CQs of a QP must belong to the PD's context");
		}
		// each acquire paired with its own release: a closed CQ refused after the PD was
		// acquired must not leave the
		// PD held (its close would then wait for ever)
		pd.acquire();
		try {
			// read with the PD held: an open PD keeps its context (and the ibv_context
			// read here) from being freed by a close on another thread
			if (Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_SEND))
					|| Native.isNull(pd.context().handle.get(ADDRESS, Layouts.CONTEXT_POST_RECV))) {
				throw new VerbsException("ibv_create_qp", Errno.EOPNOTSUPP, "the provider has no post_send/post_recv");
			}
			attributes.sendCq().acquire();
			try {
				attributes.recvCq().acquire();
				try {
					return createAcquired(pd, attributes);
				}
				finally {
					attributes.recvCq().release();
				}
			}
			finally {
				attributes.sendCq().release();
			}
		}
		finally {
			pd.release();
		}
	}

	private static QueuePair createAcquired(ProtectionDomain pd, Attributes attributes) {
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_QP_INIT_ATTR;
			MemorySegment init = a.allocate(l);
			init.set(ADDRESS, Layouts.off(l, "send_cq"), attributes.sendCq().handle);
			init.set(ADDRESS, Layouts.off(l, "recv_cq"), attributes.recvCq().handle);
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_wr"), attributes.maxSendWr());
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_wr"), attributes.maxRecvWr());
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_send_sge"), 1);
			init.set(JAVA_INT, Layouts.off(l, "cap", "max_recv_sge"), 1);
			init.set(JAVA_INT, Layouts.off(l, "qp_type"), attributes.type().code);
			init.set(JAVA_INT, Layouts.off(l, "sq_sig_all"), attributes.signalAll() ? 1 : 0);
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment qp = (MemorySegment) Ibverbs.CREATE_QP.invokeExact(capture, pd.handle, init);
			if (Native.isNull(qp)) {
				throw new VerbsException("ibv_create_qp", Native.errno(capture), attributes.toString());
			}
			try {
				return new QueuePair(pd, qp.reinterpret(Layouts.IBV_QP.byteSize()), attributes);
			}
			catch (RuntimeException e) {
				// the PD closed meanwhile: the native QP must not outlive the refusal
				int ignored = (int) Ibverbs.DESTROY_QP.invokeExact(qp);
				throw e;
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
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
		}
		finally {
			release();
		}
	}

	/** {@link Type#RC} or {@link Type#UD}, as created. */
	public Type type() {
		return attributes.type();
	}

	/**
	 * The largest QP number: QP numbers are 24 bits ({@code dest_qp_num},
	 * {@code remote_qpn}).
	 */
	public static final int MAX_QP_NUM = (1 << 24) - 1;

	@Override
	String describe() {
		return "QueuePair[" + attributes.type() + " qpn " + qpNum + "]";
	}

	/**
	 * Moves the QP through INIT, RTR and RTS connected to {@code destQpNum} at
	 * {@code destGid} over RoCE ({@code is_global=1}, the local GID at
	 * {@code sgidIndex}), with {@link ConnectionParameters#DEFAULTS}.
	 * {@code destQpNum == qpNum()} and the local GID make a loopback connection to
	 * itself.
	 * @throws IllegalArgumentException when {@code destQpNum} is outside
	 * 0..{@link #MAX_QP_NUM} (before any call)
	 */
	public void connect(int port, int sgidIndex, Gid destGid, int destQpNum) {
		connect(port, sgidIndex, destGid, destQpNum, ConnectionParameters.DEFAULTS);
	}

	/**
	 * Moves an RC QP through INIT (unless {@link #moveToInit} did already), RTR and RTS
	 * connected to {@code destQpNum} at {@code destGid} over RoCE ({@code is_global=1},
	 * the local GID at {@code sgidIndex}) with the given parameters.
	 * @throws IllegalArgumentException when {@code destQpNum} is outside
	 * 0..{@link #MAX_QP_NUM} (before any call), or {@code parameters.pathMtu()} exceeds
	 * the port's active MTU
	 * @throws IllegalStateException on a UD QP (see
	 * {@link #activate(int, int, int, int)})
	 */
	public void connect(int port, int sgidIndex, Gid destGid, int destQpNum, ConnectionParameters parameters) {
		Objects.requireNonNull(destGid, "destGid");
		connect(port, sgidIndex, destGid, true, -1, destQpNum, parameters);
	}

	/**
	 * Moves an RC QP through INIT, RTR and RTS connected to {@code destQpNum} at the
	 * remote port with LID {@code destLid} and GID {@code destGid}, addressed as
	 * rdma-core's {@code ibv_rc_pingpong} does: with a GRH ({@code is_global=1}, the
	 * local GID at {@code sgidIndex}, {@code parameters.hopLimit()}) only when
	 * {@code destGid} is given and its interface id is non-zero, else by LID alone
	 * (InfiniBand without GIDs; RoCE always needs the GID).
	 * @param destGid the remote GID, or null (or all zero) for LID-only addressing
	 * @param destLid the remote port's LID ({@code ah_attr.dlid}), 16 bits
	 * @throws IllegalArgumentException when {@code destQpNum} is outside
	 * 0..{@link #MAX_QP_NUM} (before any call), {@code parameters.pathMtu()} exceeds the
	 * port's active MTU, {@code destGid} is null or zero on a RoCE port,
	 * {@code sgidIndex} is beyond the port's GID table, or {@code maxRdAtomic} /
	 * {@code maxDestRdAtomic} exceed the device's {@code max_qp_init_rd_atom} /
	 * {@code max_qp_rd_atom} (all before any change to the QP)
	 * @throws IllegalStateException on a UD QP
	 */
	public void connect(int port, int sgidIndex, @Nullable Gid destGid, int destLid, int destQpNum,
			ConnectionParameters parameters) {
		Arguments.requireRange("destLid (dlid)", destLid, 0, 0xffff);
		connect(port, sgidIndex, destGid, destGid != null && destGid.interfaceId() != 0, destLid, destQpNum,
				parameters);
	}

	/**
	 * {@code dlid < 0}: the local port's LID (the loopback connection of the 5-argument
	 * connect).
	 */
	private void connect(int port, int sgidIndex, @Nullable Gid destGid, boolean global, int dlid, int destQpNum,
			ConnectionParameters parameters) {
		Objects.requireNonNull(parameters, "parameters");
		if (ud) {
			throw new IllegalStateException(
					describe() + " is a UD QP: it is made ready with activate(), not connected");
		}
		Arguments.requireRange("sgidIndex", sgidIndex, 0, 255);
		Arguments.requireRange("destQpNum (dest_qp_num)", destQpNum, 0, MAX_QP_NUM);
		PortAttributes portAttr = pd.context().queryPort(port);
		String where = pd.context().deviceName() + " port " + port;
		int mtuCode = parameters.pathMtuCode(portAttr.activeMtu(), where);
		if (global && sgidIndex >= portAttr.gidTableLength()) {
			throw new IllegalArgumentException("sgidIndex " + sgidIndex + " is beyond the GID table of " + where
					+ " (gid_tbl_len " + portAttr.gidTableLength() + ", ibv_query_port)");
		}
		// checked here, not by ibv_modify_qp's EINVAL after RTR (which would leave the QP
		// in RTR and name neither the value nor the limit)
		DeviceAttributes device = pd.context().queryDevice();
		if (parameters.maxRdAtomic() > device.maxQpInitRdAtom()) {
			throw new IllegalArgumentException(
					"maxRdAtomic (max_rd_atomic) " + parameters.maxRdAtomic() + " exceeds max_qp_init_rd_atom "
							+ device.maxQpInitRdAtom() + " of " + pd.context().deviceName() + " (ibv_query_device)");
		}
		if (parameters.maxDestRdAtomic() > device.maxQpRdAtom()) {
			throw new IllegalArgumentException(
					"maxDestRdAtomic (max_dest_rd_atomic) " + parameters.maxDestRdAtomic() + " exceeds max_qp_rd_atom "
							+ device.maxQpRdAtom() + " of " + pd.context().deviceName() + " (ibv_query_device)");
		}
		if (!global && portAttr.linkLayer() == PortAttributes.LinkLayer.ETHERNET) {
			// the kernel refuses a RoCE address without a GRH (rdma_check_ah_attr): an
			// EINVAL from ibv_modify_qp that names neither the GID nor the peer
			throw new IllegalArgumentException("destGid is " + (destGid == null ? "null" : "all zero") + ", but "
					+ pd.context().deviceName() + " port " + port
					+ " is RoCE (link layer ETHERNET), where the peer is addressed by its GID only: pass the peer's "
					+ "GID (ibv_rc_pingpong needs -g on both sides)");
		}
		acquire();
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_QP_ATTR;
			MemorySegment attr = a.allocate(l);
			if (handle.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "state")) != State.INIT.ordinal()) {
				modifyToInit(attr, port);
				attr.fill((byte) 0);
			}
			attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTR.ordinal());
			attr.set(JAVA_INT, Layouts.off(l, "path_mtu"), mtuCode);
			attr.set(JAVA_INT, Layouts.off(l, "dest_qp_num"), destQpNum);
			attr.set(JAVA_INT, Layouts.off(l, "rq_psn"), parameters.rqPsn());
			attr.set(JAVA_BYTE, Layouts.off(l, "max_dest_rd_atomic"), (byte) parameters.maxDestRdAtomic());
			attr.set(JAVA_BYTE, Layouts.off(l, "min_rnr_timer"), (byte) parameters.minRnrTimer());
			attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "port_num"), (byte) port);
			attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "sl"), (byte) parameters.serviceLevel());
			attr.set(JAVA_SHORT, Layouts.off(l, "ah_attr", "dlid"), (short) (dlid < 0 ? portAttr.lid() : dlid));
			if (global && destGid != null) {
				attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "is_global"), (byte) 1);
				MemorySegment.copy(MemorySegment.ofArray(destGid.raw()), 0, attr,
						Layouts.off(l, "ah_attr", "grh", "dgid"), 16);
				attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "grh", "sgid_index"), (byte) sgidIndex);
				attr.set(JAVA_BYTE, Layouts.off(l, "ah_attr", "grh", "hop_limit"), (byte) parameters.hopLimit());
			}
			modify(attr,
					QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER,
					"RTR");

			attr.fill((byte) 0);
			attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTS.ordinal());
			attr.set(JAVA_BYTE, Layouts.off(l, "timeout"), (byte) parameters.timeout());
			attr.set(JAVA_BYTE, Layouts.off(l, "retry_cnt"), (byte) parameters.retryCount());
			attr.set(JAVA_BYTE, Layouts.off(l, "rnr_retry"), (byte) parameters.rnrRetry());
			attr.set(JAVA_INT, Layouts.off(l, "sq_psn"), parameters.sqPsn());
			attr.set(JAVA_BYTE, Layouts.off(l, "max_rd_atomic"), (byte) parameters.maxRdAtomic());
			modify(attr, QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC, "RTS");
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_modify_qp} of an RC QP from RESET to INIT (P_Key index 0, {@code port},
	 * access LOCAL_WRITE, REMOTE_WRITE and REMOTE_READ), as {@code ibv_rc_pingpong} does
	 * before it posts its receives: some providers (rxe) refuse a receive posted in
	 * RESET. A later {@code connect} then starts from INIT.
	 * @throws IllegalStateException on a UD QP
	 * @throws VerbsException when the QP is not in RESET
	 */
	public void moveToInit(int port) {
		if (ud) {
			throw new IllegalStateException(describe() + " is a UD QP: it is made ready with activate()");
		}
		Arguments.requireRange("port", port, 1, 255);
		acquire();
		try (Arena a = Arena.ofConfined()) {
			modifyToInit(a.allocate(Layouts.IBV_QP_ATTR), port);
		}
		finally {
			release();
		}
	}

	private void modifyToInit(MemorySegment attr, int port) {
		var l = Layouts.IBV_QP_ATTR;
		attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.INIT.ordinal());
		attr.set(JAVA_SHORT, Layouts.off(l, "pkey_index"), (short) 0);
		attr.set(JAVA_BYTE, Layouts.off(l, "port_num"), (byte) port);
		attr.set(JAVA_INT, Layouts.off(l, "qp_access_flags"), MemoryRegion.Access.LOCAL_WRITE.bit
				| MemoryRegion.Access.REMOTE_WRITE.bit | MemoryRegion.Access.REMOTE_READ.bit);
		modify(attr, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS, "INIT");
	}

	/** {@link #activate(int, int, int, int)} with P_Key index 0 and send PSN 0. */
	public void activate(int port, int qkey) {
		activate(port, 0, qkey, 0);
	}

	/**
	 * Moves a UD QP through INIT ({@code pkey_index}, {@code port_num}, {@code qkey}),
	 * RTR and RTS ({@code sq_psn}), as rdma-core's {@code ibv_ud_pingpong} does.
	 * Afterwards it receives datagrams sent to its QP number with {@code qkey}, and sends
	 * through
	 * {@link #postSend(long, MemoryRegion, long, int, SendOpcode, int, boolean, AddressHandle, int, int)}.
	 * @param qkey the Q_Key: incoming datagrams must carry it; a send whose remote Q_Key
	 * has the high bit set sends this one instead
	 * @throws IllegalStateException on an RC QP (see {@link #connect})
	 */
	public void activate(int port, int pkeyIndex, int qkey, int sqPsn) {
		if (!ud) {
			throw new IllegalStateException(describe() + " is an RC QP: it is connected with connect(), not activated");
		}
		Arguments.requireRange("port", port, 1, 255);
		Arguments.requireRange("pkeyIndex (pkey_index)", pkeyIndex, 0, 0xffff);
		Arguments.requireRange("sqPsn (sq_psn)", sqPsn, 0, ConnectionParameters.MAX_PSN);
		acquire();
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_QP_ATTR;
			MemorySegment attr = a.allocate(l);
			attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.INIT.ordinal());
			attr.set(JAVA_SHORT, Layouts.off(l, "pkey_index"), (short) pkeyIndex);
			attr.set(JAVA_BYTE, Layouts.off(l, "port_num"), (byte) port);
			attr.set(JAVA_INT, Layouts.off(l, "qkey"), qkey);
			modify(attr, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_QKEY, "INIT");

			attr.fill((byte) 0);
			attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTR.ordinal());
			modify(attr, QP_STATE, "RTR");

			attr.fill((byte) 0);
			attr.set(JAVA_INT, Layouts.off(l, "qp_state"), State.RTS.ordinal());
			attr.set(JAVA_INT, Layouts.off(l, "sq_psn"), sqPsn);
			modify(attr, QP_STATE | QP_SQ_PSN, "RTS");
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_modify_qp} to {@link State#ERR}: every outstanding work request flushes
	 * with WR_FLUSH_ERR.
	 */
	public void moveToError() {
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
			attr.set(JAVA_INT, Layouts.off(Layouts.IBV_QP_ATTR, "qp_state"), State.ERR.ordinal());
			modify(attr, QP_STATE, "ERR");
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_modify_qp} with attributes filled elsewhere (rdma_init_qp_attr), holding
	 * the QP open for the call.
	 */
	private void modifyAcquired(MemorySegment attr, int mask, String to) {
		acquire();
		try {
			modify(attr, mask, to);
		}
		finally {
			release();
		}
	}

	private void modify(MemorySegment attr, int mask, String to) {
		try {
			int rc = (int) Ibverbs.MODIFY_QP.invokeExact(handle, attr, mask);
			if (rc != 0) {
				throw new VerbsException("ibv_modify_qp", rc, describe() + " to " + to);
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * {@code ibv_post_send} on an RC QP of one SEND or SEND_WITH_IMM of {@code length}
	 * bytes at {@code offset} of {@code mr}.
	 * @param immData immediate data in host order (sent in network order), for
	 * {@link SendOpcode#SEND_WITH_IMM}
	 * @param signaled request a completion ({@code IBV_SEND_SIGNALED})
	 */
	public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
			boolean signaled) {
		postSend(wrId, mr, offset, length, opcode, immData, signaled, false, 0, 0);
	}

	/**
	 * {@code ibv_post_send} on an RC QP of any {@link SendOpcode};
	 * {@code remoteAddr}/{@code rkey} for RDMA operations.
	 * @throws IllegalStateException when this QP, or {@code mr}, is closed (nothing is
	 * posted), or this is a UD QP
	 * @throws IndexOutOfBoundsException when {@code offset .. offset + length} is not
	 * within {@code mr} (nothing is posted)
	 */
	public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
			boolean signaled, boolean solicited, long remoteAddr, int rkey) {
		if (ud) {
			throw new IllegalStateException(describe() + " is a UD QP: each send needs an AddressHandle");
		}
		acquire();
		try {
			mr.acquire();
			try {
				checkRange(mr, offset, length);
				synchronized (sendLock) {
					fillSend(wrId, mr, offset, length, opcode, immData, signaled, solicited);
					sendWr.set(JAVA_LONG, SWR_REMOTE_ADDR, remoteAddr);
					sendWr.set(JAVA_INT, SWR_RKEY, rkey);
					postSendWr(wrId);
				}
			}
			finally {
				mr.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_post_send} on a UD QP of one datagram: a SEND or SEND_WITH_IMM of
	 * {@code length} bytes (at most the path MTU) at {@code offset} of {@code mr}, to QP
	 * {@code remoteQpn} at {@code ah} ({@code wr.ud}).
	 * @param remoteQpn the receiver's QP number, 0..{@link #MAX_QP_NUM}
	 * @param remoteQkey the receiver's Q_Key; with the high bit set the QP's own Q_Key is
	 * sent instead
	 * @throws IllegalStateException when this QP, {@code mr} or {@code ah} is closed
	 * (nothing is posted), or this is an RC QP
	 * @throws IllegalArgumentException when {@code remoteQpn} is outside
	 * 0..{@link #MAX_QP_NUM} (nothing is posted)
	 * @throws IndexOutOfBoundsException when {@code offset .. offset + length} is not
	 * within {@code mr} (nothing is posted)
	 */
	public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
			boolean signaled, AddressHandle ah, int remoteQpn, int remoteQkey) {
		postSend(wrId, mr, offset, length, opcode, immData, signaled, false, ah, remoteQpn, remoteQkey);
	}

	/** The same with {@code IBV_SEND_SOLICITED} when {@code solicited}. */
	public void postSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
			boolean signaled, boolean solicited, AddressHandle ah, int remoteQpn, int remoteQkey) {
		if (!ud) {
			throw new IllegalStateException(describe() + " is an RC QP: address handles are for UD sends");
		}
		if (opcode != SendOpcode.SEND && opcode != SendOpcode.SEND_WITH_IMM) {
			throw new IllegalArgumentException("a UD QP posts SEND or SEND_WITH_IMM only, not " + opcode);
		}
		if (ah.protectionDomain() != pd) {
			throw new IllegalArgumentException(ah + " belongs to another protection domain than " + describe());
		}
		Arguments.requireRange("remoteQpn (remote_qpn)", remoteQpn, 0, MAX_QP_NUM);
		acquire();
		try {
			mr.acquire();
			try {
				ah.acquire();
				try {
					checkRange(mr, offset, length);
					synchronized (sendLock) {
						fillSend(wrId, mr, offset, length, opcode, immData, signaled, solicited);
						sendWr.set(JAVA_LONG, SWR_UD_AH, ah.handle.address());
						sendWr.set(JAVA_INT, SWR_UD_REMOTE_QPN, remoteQpn);
						sendWr.set(JAVA_INT, SWR_UD_REMOTE_QKEY, remoteQkey);
						postSendWr(wrId);
					}
				}
				finally {
					ah.release();
				}
			}
			finally {
				mr.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	private void fillSend(long wrId, MemoryRegion mr, long offset, int length, SendOpcode opcode, int immData,
			boolean signaled, boolean solicited) {
		sendSge.set(JAVA_LONG, SGE_ADDR, mr.bufferAddress() + offset);
		sendSge.set(JAVA_INT, SGE_LENGTH, length);
		sendSge.set(JAVA_INT, SGE_LKEY, mr.lkey());
		sendWr.set(JAVA_LONG, SWR_WR_ID, wrId);
		sendWr.set(JAVA_INT, SWR_OPCODE, opcode.code);
		sendWr.set(JAVA_INT, SWR_SEND_FLAGS, (signaled ? SEND_SIGNALED : 0) | (solicited ? SEND_SOLICITED : 0));
		sendWr.set(JAVA_INT, SWR_IMM, Integer.reverseBytes(immData));
	}

	private void postSendWr(long wrId) throws Throwable {
		int rc = (int) Ibverbs.FP_POST.invokeExact(postSendFn, handle, sendWr, badSend);
		if (rc != 0) {
			throw new VerbsException("ibv_post_send", rc, describe() + " wr_id " + wrId);
		}
	}

	/**
	 * {@code ibv_post_recv} of one receive of up to {@code length} bytes at
	 * {@code offset} of {@code mr}. On a UD QP the first {@value #GRH_BYTES} bytes
	 * receive the GRH, the payload follows.
	 * @throws IllegalStateException when this QP or {@code mr} is closed (nothing is
	 * posted)
	 * @throws IndexOutOfBoundsException when {@code offset .. offset + length} is not
	 * within {@code mr} (nothing is posted)
	 */
	public void postRecv(long wrId, MemoryRegion mr, long offset, int length) {
		acquire();
		try {
			mr.acquire();
			try {
				checkRange(mr, offset, length);
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
			}
			finally {
				mr.release();
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	private static void checkRange(MemoryRegion mr, long offset, int length) {
		checkRange(mr.buffer().byteSize(), offset, length);
	}

	/**
	 * Throws {@link IndexOutOfBoundsException} unless {@code offset .. offset + length}
	 * lies within a region of {@code regionSize} bytes, without overflow (an offset near
	 * {@link Long#MAX_VALUE} made {@code offset + length} negative, and the post went
	 * through).
	 */
	static void checkRange(long regionSize, long offset, int length) {
		if (offset < 0 || length < 0 || offset > regionSize - length) {
			throw new IndexOutOfBoundsException(
					"offset " + offset + " + length " + length + " outside the " + regionSize + "-byte memory region");
		}
	}

	/**
	 * Refuses {@code ibv_destroy_qp} on a thread that is inside an iterator batch of the
	 * QP's send or receive CQ (see {@link #close()}), before the close lock (a close of
	 * another thread, which may wait for this thread's batch, is never waited for) and
	 * before any native call.
	 */
	@Override
	void checkCloseAllowedOnThisThread() {
		CompletionQueue send = attributes.sendCq();
		CompletionQueue recv = attributes.recvCq();
		CompletionQueue held = send.batchOpenOnCurrentThread() ? send : recv.batchOpenOnCurrentThread() ? recv : null;
		if (held != null) {
			throw new IllegalStateException("cannot close " + describe() + " (ibv_destroy_qp) inside a batch of its "
					+ (held == send ? "send" : "receive") + " CQ " + held.describe()
					+ " on this thread (a poll handler, or between startPoll() and endPoll()): the provider holds "
					+ "that CQ's spinlock until ibv_end_poll and ibv_destroy_qp takes it (mlx5, mlx4, efa, irdma), "
					+ "so the thread would spin for ever; close the QP after the poll returned (or after endPoll())");
		}
	}

	/**
	 * {@code ibv_destroy_qp}, which cleans the QP's completions off its CQs. A provider
	 * does that under the CQ's lock, so it waits for a poll or an iterator batch of
	 * another thread to end (mlx5, mlx4, efa, irdma); a {@code SINGLE_THREADED} CQ has no
	 * lock, so the destroy runs in that CQ's exclusive slot instead (both CQs in address
	 * order, so two closes never wait for each other): it waits, bounded, for another
	 * thread's poll or batch to end rather than rewrite the CQ under it.
	 */
	@Override
	void destroy() {
		CompletionQueue send = attributes.sendCq();
		CompletionQueue recv = attributes.recvCq();
		CompletionQueue first = send.providerLockFree() ? send : null;
		CompletionQueue second = recv != send && recv.providerLockFree() ? recv : null;
		if (first != null && second != null && Long.compareUnsigned(first.address(), second.address()) > 0) {
			CompletionQueue t = first;
			first = second;
			second = t;
		}
		else if (first == null) {
			first = second;
			second = null;
		}
		if (first != null) {
			first.enterExclusive("ibv_destroy_qp");
		}
		try {
			if (second != null) {
				second.enterExclusive("ibv_destroy_qp");
			}
			try {
				destroyVerb(Ibverbs.DESTROY_QP, handle, "ibv_destroy_qp", describe());
			}
			finally {
				if (second != null) {
					second.exitExclusive();
				}
			}
		}
		finally {
			if (first != null) {
				first.exitExclusive();
			}
		}
		attributes.sendCq().removeUser(this);
		attributes.recvCq().removeUser(this);
		arena.close();
	}

}
