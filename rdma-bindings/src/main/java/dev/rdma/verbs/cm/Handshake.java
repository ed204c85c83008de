package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.QueuePairAccess;
import dev.rdma.verbs.ffm.Rdmacm;
import dev.rdma.verbs.ffm.RdmacmLayouts;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The connect/accept handshake of a {@link ConnectionId} and its QP: {@code rdma_listen},
 * {@code rdma_connect}, {@code rdma_accept}, {@code rdma_reject}, {@code rdma_establish},
 * {@code rdma_disconnect}, the QP's moves with {@code rdma_init_qp_attr}, the private
 * data limits, and the blocking conveniences that run these steps and wait for their
 * events. The public methods of {@link ConnectionId} document each step. Thread-safe.
 */
final class Handshake {

	/** {@code IBV_QP_MAX_DEST_RD_ATOMIC} of {@code enum ibv_qp_attr_mask}. */
	static final int QP_MAX_DEST_RD_ATOMIC = 1 << 17;

	private final ConnectionId id;

	private volatile @Nullable QueuePair queuePair;

	Handshake(ConnectionId id) {
		this.id = id;
	}

	/** The QP given to connect or accept, or null. */
	@Nullable QueuePair queuePair() {
		return queuePair;
	}

	// ------------------------------------------------------------------ single steps

	void listen(int backlog) {
		if (backlog < 0) {
			throw new IllegalArgumentException("backlog must be >= 0, got " + backlog);
		}
		id.call("rdma_listen", "backlog " + backlog,
				(a, capture) -> (int) Rdmacm.LISTEN.invokeExact(capture, id.handle, backlog));
	}

	void moveQueuePair(QueuePair qp, QueuePair.State state) {
		Objects.requireNonNull(qp, "qp");
		Objects.requireNonNull(state, "state");
		if (state == QueuePair.State.ERR) {
			qp.moveToError();
			return;
		}
		if (state != QueuePair.State.INIT && state != QueuePair.State.RTR && state != QueuePair.State.RTS) {
			throw new IllegalArgumentException("moveQueuePair moves a QP to INIT, RTR, RTS or ERR, not " + state);
		}
		id.resolution.requireSameDevice(qp);
		id.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
			MemorySegment mask = a.allocate(JAVA_INT);
			MemorySegment capture = Native.allocateCapture(a);
			attr.set(JAVA_INT, Layouts.off(Layouts.IBV_QP_ATTR, "qp_state"), state.ordinal());
			int rc = (int) Rdmacm.INIT_QP_ATTR.invokeExact(capture, id.handle, attr, mask);
			if (rc != 0) {
				throw new VerbsException("rdma_init_qp_attr", Native.errno(capture), id.describe() + " for " + state);
			}
			int m = mask.get(JAVA_INT, 0);
			if (state == QueuePair.State.RTR && id.listener() != null) {
				clampResponderResources(attr, m, qp.protectionDomain().context().queryDevice().maxQpRdAtom());
			}
			QueuePairAccess.Holder.get().modify(qp, attr, m, state + " (rdma_init_qp_attr)");
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			id.release();
		}
	}

	/**
	 * On the passive side's RTR: {@code max_dest_rd_atomic}, which the CM sets to the
	 * client's initiator depth as it came in the request, lowered to the device's
	 * {@code max_qp_rd_atom} (capped at 255, the field's width), as librdmacm's
	 * {@code rdma_accept} does for its own QPs (responder resources
	 * {@code min(request, device)}, the value its accept also sends back). Nothing when
	 * {@code mask} has no {@code IBV_QP_MAX_DEST_RD_ATOMIC}.
	 */
	static void clampResponderResources(MemorySegment attr, int mask, int deviceMaxQpRdAtom) {
		if ((mask & QP_MAX_DEST_RD_ATOMIC) == 0) {
			return;
		}
		long offset = Layouts.off(Layouts.IBV_QP_ATTR, "max_dest_rd_atomic");
		int max = Math.min(Math.max(deviceMaxQpRdAtom, 0), 0xFF);
		if (Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset)) > max) {
			attr.set(JAVA_BYTE, offset, (byte) max);
		}
	}

	void connect(QueuePair qp, CmParameters parameters, byte[] privateData) {
		connectOrAccept("rdma_connect", Rdmacm.CONNECT, ConnectionId.MAX_CONNECT_PRIVATE_DATA,
				"resolveAddress and resolveRoute", qp, parameters, privateData);
	}

	void accept(QueuePair qp, CmParameters parameters, byte[] privateData) {
		connectOrAccept("rdma_accept", Rdmacm.ACCEPT, ConnectionId.MAX_ACCEPT_PRIVATE_DATA,
				"a CONNECT_REQUEST (accept is for the id of a request)", qp, parameters, privateData);
	}

	/**
	 * {@code rdma_connect} or {@code rdma_accept} ({@code verb}, called through
	 * {@code handle}: {@code int verb(struct rdma_cm_id *, struct rdma_conn_param *)})
	 * with {@code qp}, once the arguments are checked: the private data at most
	 * {@code maxPrivateData} bytes, the id bound to a device ({@code needed} says by
	 * what) and the QP on that device.
	 */
	private void connectOrAccept(String verb, MethodHandle handle, int maxPrivateData, String needed, QueuePair qp,
			CmParameters parameters, byte[] privateData) {
		Objects.requireNonNull(qp, "qp");
		Objects.requireNonNull(parameters, "parameters");
		checkPrivateData(verb, privateData, maxPrivateData);
		id.resolution.requireDevice(verb, needed);
		id.resolution.requireSameDevice(qp);
		queuePair = qp;
		id.call(verb, "qp_num " + qp.qpNum(), (a,
				capture) -> (int) handle.invokeExact(capture, id.handle, connParam(a, qp, parameters, privateData)));
	}

	void reject(byte[] privateData) {
		checkPrivateData("rdma_reject", privateData, ConnectionId.MAX_REJECT_PRIVATE_DATA);
		id.call("rdma_reject", privateData.length + " bytes of private data", (a, capture) -> {
			MemorySegment data = privateData.length == 0 ? MemorySegment.NULL : a.allocateFrom(JAVA_BYTE, privateData);
			return (int) Rdmacm.REJECT.invokeExact(capture, id.handle, data, (byte) privateData.length);
		});
	}

	void establish() {
		id.call("rdma_establish", id.describe(),
				(a, capture) -> (int) Rdmacm.ESTABLISH.invokeExact(capture, id.handle));
		id.connected = true;
	}

	void disconnect() {
		// a QP the application closed meanwhile: nothing to flush
		queuePairToError(IllegalStateException.class);
		id.call("rdma_disconnect", id.describe(),
				(a, capture) -> (int) Rdmacm.DISCONNECT.invokeExact(capture, id.handle));
	}

	/**
	 * {@code rdma_disconnect}, its result ignored; the caller holds the id
	 * ({@code acquire()}, or the id's destroy with no call in flight).
	 */
	void disconnectQuietly() {
		try (Arena a = Arena.ofConfined()) {
			int ignored = (int) Rdmacm.DISCONNECT.invokeExact(Native.allocateCapture(a), id.handle);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * The attached QP to the error state, if it is still open; a QP closed or in error
	 * meanwhile is left as it is (nothing to flush).
	 */
	void queuePairToErrorQuietly() {
		// closed by the application meanwhile, or already in error
		queuePairToError(RuntimeException.class);
	}

	/**
	 * The attached QP to the error state, if it is still open; a failure of the
	 * {@code ignored} type is passed over, any other thrown.
	 */
	private void queuePairToError(Class<? extends RuntimeException> ignored) {
		QueuePair qp = queuePair;
		if (qp != null && !qp.isClosed()) {
			try {
				qp.moveToError();
			}
			catch (RuntimeException ex) {
				if (!ignored.isInstance(ex)) {
					throw ex;
				}
			}
		}
	}

	// ---------------------------------------------------- blocking conveniences

	CmEvent connect(InetSocketAddress destination, @Nullable InetSocketAddress source, QueuePair qp, byte[] privateData,
			Duration timeout) {
		Objects.requireNonNull(destination, "destination");
		Objects.requireNonNull(qp, "qp");
		checkPrivateData("rdma_connect", privateData, ConnectionId.MAX_CONNECT_PRIVATE_DATA);
		long deadline = System.nanoTime() + timeout.toNanos();
		String what = "to " + destination;
		id.resolution.resolveAddressWithin(source, destination, deadline, timeout, what);
		id.resolution.resolveRoute(AddressResolution.remaining(deadline));
		id.events.await("rdma_resolve_route", what, deadline, timeout, CmEventType.ROUTE_RESOLVED);
		moveQueuePair(qp, QueuePair.State.INIT);
		connect(qp, CmParameters.DEFAULTS, privateData);
		CmEvent response = id.events.await("rdma_connect", what, deadline, timeout, CmEventType.CONNECT_RESPONSE,
				CmEventType.ESTABLISHED);
		if (response.type() == CmEventType.CONNECT_RESPONSE) {
			// INIT again: the access flags the CM computes once the remote side answered
			// (librdmacm's ucma_modify_qp_rtr does the same)
			moveQueuePair(qp, QueuePair.State.INIT);
			moveQueuePair(qp, QueuePair.State.RTR);
			moveQueuePair(qp, QueuePair.State.RTS);
			establish();
		}
		return response;
	}

	ConnectionId awaitRequest(Duration timeout) {
		CmEvent e = id.events.await("rdma_listen", "on " + id.localAddress(), System.nanoTime() + timeout.toNanos(),
				timeout, CmEventType.CONNECT_REQUEST);
		return e.id();
	}

	CmEvent accept(QueuePair qp, byte[] privateData, Duration timeout) {
		Objects.requireNonNull(qp, "qp");
		checkPrivateData("rdma_accept", privateData, ConnectionId.MAX_ACCEPT_PRIVATE_DATA);
		long deadline = System.nanoTime() + timeout.toNanos();
		moveQueuePair(qp, QueuePair.State.INIT);
		moveQueuePair(qp, QueuePair.State.RTR);
		moveQueuePair(qp, QueuePair.State.RTS);
		accept(qp, CmParameters.DEFAULTS, privateData);
		return id.events.await("rdma_accept", "from " + id.peerAddress(), deadline, timeout, CmEventType.ESTABLISHED);
	}

	void disconnect(Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		// also after the peer's DREQ: rdma_disconnect then answers it (DREP), which the
		// peer's own rdma_disconnect waits for; the one DISCONNECTED of the id has come
		boolean peerFirst = id.disconnected;
		// never ESTABLISHED (a server's accept whose RTU never came, though the peer's
		// first message did): ib_cm has no DREQ to send before ESTABLISHED, so no
		// DISCONNECTED comes; the QP goes to error, and destroying the id rejects
		boolean established = id.connected;
		disconnect();
		if (peerFirst || !established) {
			return;
		}
		if (id.events.takeDisconnected()) {
			return;
		}
		id.events.await("rdma_disconnect", id.describe(), deadline, timeout, CmEventType.DISCONNECTED);
	}

	CmEvent awaitDisconnect(Duration timeout) {
		id.acquire();
		try {
			CmEvent e = id.events.await("rdma_disconnect (by the peer)", id.describe(),
					System.nanoTime() + timeout.toNanos(), timeout, CmEventType.DISCONNECTED);
			Runnable hook = ConnectionId.beforeAnswer;
			if (hook != null) {
				hook.run();
			}
			queuePairToErrorQuietly();
			// the answer; an error here (the id already disconnected by this side)
			// changes nothing for the caller, who got the peer's DISCONNECTED
			disconnectQuietly();
			return e;
		}
		finally {
			id.release();
		}
	}

	// ------------------------------------------------------------------ helpers

	static void checkPrivateData(String verb, byte[] privateData, int max) {
		Objects.requireNonNull(privateData, "privateData");
		if (privateData.length > max) {
			throw new IllegalArgumentException("privateData of " + verb + " is limited to " + max
					+ " bytes on RDMA_PS_TCP, got " + privateData.length);
		}
	}

	private static MemorySegment connParam(Arena a, QueuePair qp, CmParameters p, byte[] privateData) {
		var l = RdmacmLayouts.RDMA_CONN_PARAM;
		MemorySegment param = a.allocate(l);
		if (privateData.length > 0) {
			param.set(ADDRESS, Layouts.off(l, "private_data"), a.allocateFrom(JAVA_BYTE, privateData));
		}
		param.set(JAVA_BYTE, Layouts.off(l, "private_data_len"), (byte) privateData.length);
		param.set(JAVA_BYTE, Layouts.off(l, "responder_resources"), (byte) p.responderResources());
		param.set(JAVA_BYTE, Layouts.off(l, "initiator_depth"), (byte) p.initiatorDepth());
		param.set(JAVA_BYTE, Layouts.off(l, "retry_count"), (byte) p.retryCount());
		param.set(JAVA_BYTE, Layouts.off(l, "rnr_retry_count"), (byte) p.rnrRetryCount());
		param.set(JAVA_INT, Layouts.off(l, "qp_num"), qp.qpNum());
		// rdma_conn_param.srq: the QP is not the id's own (no rdma_create_qp), so
		// librdmacm
		// learns from this flag that it receives from a shared receive queue (the CM
		// REQ/REP
		// carry it)
		param.set(JAVA_BYTE, Layouts.off(l, "srq"), (byte) (qp.sharedReceiveQueue() != null ? 1 : 0));
		return param;
	}

}
