package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.QueuePair.State;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The state transitions of one {@link QueuePair} ({@code ibv_modify_qp}): the
 * {@code struct ibv_qp_attr} and attribute mask of each move (INIT, RTR, RTS of an RC
 * connection or a UD activation, ERR), the checks made before the first change, and the
 * move with attributes that {@code rdma_init_qp_attr} filled (the connection manager's
 * hook). The public verbs and their documentation are {@link QueuePair}'s.
 */
final class QueuePairTransitions {

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

	private final QueuePair qp;

	QueuePairTransitions(QueuePair qp) {
		this.qp = qp;
	}

	private ProtectionDomain pd() {
		return qp.protectionDomain();
	}

	/**
	 * {@code dlid < 0}: the local port's LID (the loopback connection of the 5-argument
	 * connect).
	 */
	void connect(int port, int sgidIndex, @Nullable Gid destGid, boolean global, int dlid, int destQpNum,
			ConnectionParameters parameters) {
		Objects.requireNonNull(parameters, "parameters");
		if (qp.type() == QueuePair.Type.UD) {
			throw new IllegalStateException(
					qp.describe() + " is a UD QP: it is made ready with activate(), not connected");
		}
		Arguments.requireRange("sgidIndex", sgidIndex, 0, 255);
		Arguments.requireRange("destQpNum (dest_qp_num)", destQpNum, 0, QueuePair.MAX_QP_NUM);
		PortAttributes portAttr = pd().context().queryPort(port);
		String where = pd().context().deviceName() + " port " + port;
		int mtuCode = parameters.pathMtuCode(portAttr.activeMtu(), where);
		if (global && sgidIndex >= portAttr.gidTableLength()) {
			throw new IllegalArgumentException("sgidIndex " + sgidIndex + " is beyond the GID table of " + where
					+ " (gid_tbl_len " + portAttr.gidTableLength() + ", ibv_query_port)");
		}
		// checked here, not by ibv_modify_qp's EINVAL after RTR (which would leave the QP
		// in RTR and name neither the value nor the limit)
		DeviceAttributes device = pd().context().queryDevice();
		if (parameters.maxRdAtomic() > device.maxQpInitRdAtom()) {
			throw new IllegalArgumentException(
					"maxRdAtomic (max_rd_atomic) " + parameters.maxRdAtomic() + " exceeds max_qp_init_rd_atom "
							+ device.maxQpInitRdAtom() + " of " + pd().context().deviceName() + " (ibv_query_device)");
		}
		if (parameters.maxDestRdAtomic() > device.maxQpRdAtom()) {
			throw new IllegalArgumentException(
					"maxDestRdAtomic (max_dest_rd_atomic) " + parameters.maxDestRdAtomic() + " exceeds max_qp_rd_atom "
							+ device.maxQpRdAtom() + " of " + pd().context().deviceName() + " (ibv_query_device)");
		}
		if (!global && portAttr.linkLayer() == PortAttributes.LinkLayer.ETHERNET) {
			// the kernel refuses a RoCE address without a GRH (rdma_check_ah_attr): an
			// EINVAL from ibv_modify_qp that names neither the GID nor the peer
			throw new IllegalArgumentException("destGid is " + (destGid == null ? "null" : "all zero") + ", but "
					+ pd().context().deviceName() + " port " + port
					+ " is RoCE (link layer ETHERNET), where the peer is addressed by its GID only: pass the peer's "
					+ "GID (ibv_rc_pingpong needs -g on both sides)");
		}
		qp.acquire();
		try (Arena a = Arena.ofConfined()) {
			var l = Layouts.IBV_QP_ATTR;
			MemorySegment attr = a.allocate(l);
			if (qp.handle.get(JAVA_INT, Layouts.off(Layouts.IBV_QP, "state")) != State.INIT.ordinal()) {
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
			qp.release();
		}
	}

	void moveToInit(int port) {
		if (qp.type() == QueuePair.Type.UD) {
			throw new IllegalStateException(qp.describe() + " is a UD QP: it is made ready with activate()");
		}
		Arguments.requireRange("port", port, 1, 255);
		qp.acquire();
		try (Arena a = Arena.ofConfined()) {
			modifyToInit(a.allocate(Layouts.IBV_QP_ATTR), port);
		}
		finally {
			qp.release();
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

	void activate(int port, int pkeyIndex, int qkey, int sqPsn) {
		if (qp.type() != QueuePair.Type.UD) {
			throw new IllegalStateException(
					qp.describe() + " is an RC QP: it is connected with connect(), not activated");
		}
		Arguments.requireRange("port", port, 1, 255);
		Arguments.requireRange("pkeyIndex (pkey_index)", pkeyIndex, 0, 0xffff);
		Arguments.requireRange("sqPsn (sq_psn)", sqPsn, 0, ConnectionParameters.MAX_PSN);
		qp.acquire();
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
			qp.release();
		}
	}

	void moveToError() {
		qp.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
			attr.set(JAVA_INT, Layouts.off(Layouts.IBV_QP_ATTR, "qp_state"), State.ERR.ordinal());
			modify(attr, QP_STATE, "ERR");
		}
		finally {
			qp.release();
		}
	}

	/**
	 * {@code ibv_modify_qp} with attributes filled elsewhere (rdma_init_qp_attr), holding
	 * the QP open for the call.
	 */
	void modifyAcquired(MemorySegment attr, int mask, String to) {
		qp.acquire();
		try {
			modify(attr, mask, to);
		}
		finally {
			qp.release();
		}
	}

	private void modify(MemorySegment attr, int mask, String to) {
		try {
			int rc = (int) Ibverbs.MODIFY_QP.invokeExact(qp.handle, attr, mask);
			if (rc != 0) {
				throw new VerbsException("ibv_modify_qp", rc, qp.describe() + " to " + to);
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

}
