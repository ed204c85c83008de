package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A queue pair ({@code struct ibv_qp *}, {@code ibv_create_qp} / {@code ibv_modify_qp} /
 * {@code ibv_destroy_qp}), reliable-connected ({@link Type#RC}) or unreliable datagram
 * ({@link Type#UD}). {@link #postSend(SendWorkRequest)} and
 * {@link #postRecv(ReceiveWorkRequest)} are the inline verbs of verbs.h, called through
 * {@code qp->context->ops}; each posts a {@link SendWorkRequest} or
 * {@link ReceiveWorkRequest} the caller filled once and reuses, so posting allocates
 * nothing. A post holds the memory region (and the address handle of a UD send) open for
 * the duration of the call: a closed one is refused with {@link IllegalStateException}
 * before anything is posted. Any number of threads may post, each with its own work
 * requests (the provider serialises the posts of one queue).
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
	 * @param recvCq CQ of the receive queue (the completions of receives taken from the
	 * shared receive queue, when there is one)
	 * @param maxSendWr outstanding sends
	 * @param maxRecvWr outstanding receives (ignored, and 0 is passed, with a shared
	 * receive queue)
	 * @param signalAll {@code sq_sig_all}: every send completes, not only those posted
	 * signaled
	 * @param type {@code qp_type}
	 * @param maxInlineData {@code cap.max_inline_data}: the largest inline send asked for
	 * (0: none); the provider may grant more, {@link QueuePair#maxInlineData()} is what
	 * it granted
	 * @param sharedReceiveQueue {@code srq}: the shared receive queue the QP receives
	 * from (of the same protection domain), or null for its own receive queue
	 */
	public record Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
			boolean signalAll, Type type, int maxInlineData, @Nullable SharedReceiveQueue sharedReceiveQueue) {
		public Attributes

		{
			Objects.requireNonNull(sendCq, "sendCq");
			Objects.requireNonNull(recvCq, "recvCq");
			Objects.requireNonNull(type, "type");
			if (maxInlineData < 0) {
				throw new IllegalArgumentException(
						"maxInlineData (max_inline_data) must be >= 0, got " + maxInlineData);
			}
		}

		/** The attributes of a QP without inline data or shared receive queue. */
		public Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
				boolean signalAll, Type type) {
			this(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, type, 0, null);
		}

		/** The attributes of an RC QP. */
		public Attributes(CompletionQueue sendCq, CompletionQueue recvCq, int maxSendWr, int maxRecvWr,
				boolean signalAll) {
			this(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, Type.RC);
		}

		public Attributes withType(Type type) {
			return new Attributes(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, type, maxInlineData,
					sharedReceiveQueue);
		}

		/** A copy asking for {@code cap.max_inline_data} bytes of inline sends. */
		public Attributes withMaxInlineData(int maxInlineData) {
			return new Attributes(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, type, maxInlineData,
					sharedReceiveQueue);
		}

		/** A copy receiving from {@code srq} (null: the QP's own receive queue). */
		public Attributes withSharedReceiveQueue(@Nullable SharedReceiveQueue srq) {
			return new Attributes(sendCq, recvCq, maxSendWr, maxRecvWr, signalAll, type, maxInlineData, srq);
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

	static {
		// the connection manager (dev.rdma.verbs.cm) moves a QP with the attributes
		// rdma_init_qp_attr filled
		dev.rdma.verbs.ffm.QueuePairAccess.Holder
			.install((qp, attr, mask, what) -> ((QueuePair) qp).transitions.modifyAcquired(attr, mask, what));
	}

	private final ProtectionDomain pd;

	private final Attributes attributes;

	private final int qpNum;

	private final QueuePairTransitions transitions = new QueuePairTransitions(this);

	private final QueuePairPosting posting;

	private final Capabilities capabilities;

	QueuePair(ProtectionDomain pd, MemorySegment qp, Attributes attributes, Capabilities capabilities) {
		super(qp, pd);
		this.pd = pd;
		this.attributes = attributes;
		this.capabilities = capabilities;
		this.qpNum = qp.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "qp_num"));
		this.posting = new QueuePairPosting(this, pd.context().handle);
		// the CQs (and the SRQ) refuse to close while a QP uses them (ibv_destroy_cq's
		// and ibv_destroy_srq's EBUSY, foreseen)
		attributes.sendCq().addUser(this);
		attributes.recvCq().addUser(this);
		if (attributes.sharedReceiveQueue() != null) {
			attributes.sharedReceiveQueue().addUser(this);
		}
	}

	/**
	 * {@code struct ibv_qp_cap} as the provider granted it: what {@code ibv_create_qp}
	 * wrote back into {@code init_attr.cap}, at least what was asked for.
	 *
	 * @param maxSendWr {@code max_send_wr}
	 * @param maxRecvWr {@code max_recv_wr} (0 on a QP of a shared receive queue)
	 * @param maxSendSge {@code max_send_sge}
	 * @param maxRecvSge {@code max_recv_sge}
	 * @param maxInlineData {@code max_inline_data}: the largest
	 * {@link SendWorkRequest.Flag#INLINE} send
	 */
	public record Capabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {
	}

	/** The capabilities the provider granted at creation ({@code init_attr.cap}). */
	public Capabilities capabilities() {
		return capabilities;
	}

	/** {@code IBV_QP_CAP} of {@code enum ibv_qp_attr_mask}. */
	static final int IBV_QP_CAP = 1 << 19;

	/**
	 * {@code ibv_query_qp} with {@code IBV_QP_CAP}: the capabilities as the provider
	 * reports them now ({@code attr.cap}; on a QP of a shared receive queue
	 * {@code max_recv_wr} is 0).
	 * @throws VerbsException when the provider refuses (errno and its text)
	 */
	public Capabilities queryCapabilities() {
		acquire();
		try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
			var l = Layouts.IBV_QP_ATTR;
			MemorySegment attr = a.allocate(l);
			MemorySegment init = a.allocate(Layouts.IBV_QP_INIT_ATTR);
			int rc = (int) Ibverbs.QUERY_QP.invokeExact(handle, attr, IBV_QP_CAP, init);
			if (rc != 0) {
				throw new VerbsException("ibv_query_qp", rc, describe() + " IBV_QP_CAP");
			}
			return new Capabilities(attr.get(JAVA_INT, Layouts.off(l, "cap", "max_send_wr")),
					attr.get(JAVA_INT, Layouts.off(l, "cap", "max_recv_wr")),
					attr.get(JAVA_INT, Layouts.off(l, "cap", "max_send_sge")),
					attr.get(JAVA_INT, Layouts.off(l, "cap", "max_recv_sge")),
					attr.get(JAVA_INT, Layouts.off(l, "cap", "max_inline_data")));
		}
		catch (Throwable t) {
			throw dev.rdma.verbs.ffm.Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/**
	 * {@code cap.max_inline_data} as granted: the largest send this QP posts with
	 * {@link SendWorkRequest.Flag#INLINE}; a larger one is refused before the post.
	 */
	public int maxInlineData() {
		return capabilities.maxInlineData();
	}

	/** The shared receive queue this QP receives from, or null. */
	public @Nullable SharedReceiveQueue sharedReceiveQueue() {
		return attributes.sharedReceiveQueue();
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
		transitions.connect(port, sgidIndex, destGid, true, -1, destQpNum, parameters);
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
		transitions.connect(port, sgidIndex, destGid, destGid != null && destGid.interfaceId() != 0, destLid, destQpNum,
				parameters);
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
		transitions.moveToInit(port);
	}

	/** {@link #activate(int, int, int, int)} with P_Key index 0 and send PSN 0. */
	public void activate(int port, int qkey) {
		activate(port, 0, qkey, 0);
	}

	/**
	 * Moves a UD QP through INIT ({@code pkey_index}, {@code port_num}, {@code qkey}),
	 * RTR and RTS ({@code sq_psn}), as rdma-core's {@code ibv_ud_pingpong} does.
	 * Afterwards it receives datagrams sent to its QP number with {@code qkey}, and sends
	 * through {@link #postSend(SendWorkRequest)} with
	 * {@link SendWorkRequest#datagram(AddressHandle, int, int)}.
	 * @param qkey the Q_Key: incoming datagrams must carry it; a send whose remote Q_Key
	 * has the high bit set sends this one instead
	 * @throws IllegalStateException on an RC QP (see {@link #connect})
	 */
	public void activate(int port, int pkeyIndex, int qkey, int sqPsn) {
		transitions.activate(port, pkeyIndex, qkey, sqPsn);
	}

	/**
	 * {@code ibv_modify_qp} to {@link State#ERR}: every outstanding work request flushes
	 * with WR_FLUSH_ERR.
	 */
	public void moveToError() {
		transitions.moveToError();
	}

	/**
	 * {@code ibv_post_send} of one work request, filled beforehand and reusable (see
	 * {@link SendWorkRequest}): on an RC QP any {@link SendOpcode} (RDMA operations with
	 * {@link SendWorkRequest#remote(long, int)}), on a UD QP one datagram (a SEND or
	 * SEND_WITH_IMM of at most the path MTU) to the destination of
	 * {@link SendWorkRequest#datagram(AddressHandle, int, int)}. The post holds this QP,
	 * the memory region and the address handle open for the call, and allocates nothing.
	 * @throws IllegalStateException when this QP, the memory region or the address handle
	 * is closed, or {@code wr} is closed, has no buffer, or another post is using it; on
	 * a UD QP when {@code wr} has no address handle, on an RC QP when it has one (nothing
	 * is posted)
	 * @throws IllegalArgumentException on a UD QP for an opcode other than SEND and
	 * SEND_WITH_IMM, or an address handle of another protection domain (nothing is
	 * posted)
	 * @throws IndexOutOfBoundsException when the buffer is not within its memory region
	 * (nothing is posted)
	 * @throws VerbsException when the provider refuses the work request (errno and its
	 * text, the QP and the {@code wr_id})
	 */
	public void postSend(SendWorkRequest wr) {
		posting.postSend(wr);
	}

	/**
	 * {@code ibv_post_recv} of one work request, filled beforehand and reusable (see
	 * {@link ReceiveWorkRequest}). Refused with {@link IllegalStateException} on a QP of
	 * a {@link SharedReceiveQueue} (post to the SRQ). On a UD QP the first
	 * {@value #GRH_BYTES} bytes of its buffer receive the GRH, the payload follows. The
	 * post holds this QP and the memory region open for the call, and allocates nothing.
	 * @throws IllegalStateException when this QP or the memory region is closed, or
	 * {@code wr} is closed, has no buffer, or another post is using it (nothing is
	 * posted)
	 * @throws IndexOutOfBoundsException when the buffer is not within its memory region
	 * (nothing is posted)
	 * @throws VerbsException when the provider refuses the work request (errno and its
	 * text, the QP and the {@code wr_id})
	 */
	public void postRecv(ReceiveWorkRequest wr) {
		posting.postRecv(wr);
	}

	/**
	 * {@code ibv_post_send} of a chain: the work requests of {@code wrs}, linked in list
	 * order through their native {@code next} pointers for the call (one doorbell), each
	 * checked as by {@link #postSend(SendWorkRequest)} before anything is posted.
	 * Allocates nothing (iterate an {@link java.util.ArrayList} or an array-backed list);
	 * the work requests may be reposted, singly or in another chain, as soon as it
	 * returns. Selective signaling: post most of them without
	 * {@link SendWorkRequest.Flag#SIGNALED} on a QP created without {@code signalAll};
	 * the send queue slots of unsignaled sends are freed when a later signaled send of
	 * the same QP completes.
	 * @throws ChainPostException when the provider refuses an element ({@code bad_wr},
	 * e.g. ENOMEM: the send queue is full): {@link ChainPostException#failedIndex()}
	 * names it; the elements before it were posted, it and the ones after it were not
	 * @throws IllegalArgumentException when {@code wrs} is empty, or as
	 * {@link #postSend(SendWorkRequest)} (naming the element; nothing is posted)
	 * @throws IllegalStateException as {@link #postSend(SendWorkRequest)}, and when one
	 * work request appears twice in the chain (nothing is posted)
	 */
	public void postSend(List<SendWorkRequest> wrs) {
		posting.postSend(wrs);
	}

	/**
	 * {@code ibv_post_recv} of a chain: the work requests of {@code wrs} linked in list
	 * order, one call, each checked as by {@link #postRecv(ReceiveWorkRequest)} before
	 * anything is posted. Allocates nothing.
	 * @throws ChainPostException when the provider refuses an element (ENOMEM: the
	 * receive queue is full): the elements before it were posted, it and the ones after
	 * it were not
	 * @throws IllegalArgumentException when {@code wrs} is empty
	 * @throws IllegalStateException as {@link #postRecv(ReceiveWorkRequest)}, and when
	 * one work request appears twice (nothing is posted)
	 */
	public void postRecv(List<ReceiveWorkRequest> wrs) {
		posting.postRecv(wrs);
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
		forgetUses();
	}

	/** Construction failed after the CQs (and the SRQ) counted this QP as a user. */
	@Override
	void abandoned() {
		if (attributes != null) {
			forgetUses();
		}
	}

	private void forgetUses() {
		attributes.sendCq().removeUser(this);
		attributes.recvCq().removeUser(this);
		if (attributes.sharedReceiveQueue() != null) {
			attributes.sharedReceiveQueue().removeUser(this);
		}
	}

}
