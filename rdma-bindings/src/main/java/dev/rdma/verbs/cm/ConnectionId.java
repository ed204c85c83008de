package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.Errno;
import dev.rdma.verbs.Gid;
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
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A connection-manager id ({@code struct rdma_cm_id *}, {@code rdma_create_id} /
 * {@code rdma_destroy_id}) of the RDMA_PS_TCP port space: one end of a reliable
 * connection, or a listener. Created by {@link EventChannel#createId()}, or by a
 * listener's connect request ({@link #awaitRequest}).
 *
 * <p>
 * <b>Queue pair.</b> The QP is the application's own, created with
 * {@code ProtectionDomain.createQueuePair} on the device this id resolved to
 * ({@link #deviceName()}), on the application's CQs. The id never creates or destroys it:
 * {@link #moveQueuePair} applies the attributes {@code rdma_init_qp_attr} computes for a
 * state with {@code ibv_modify_qp} (as rust-ibverbs and sideway do; not
 * {@code rdma_create_qp}/{@code rdma_create_ep}), and the QP number travels in
 * {@code rdma_conn_param.qp_num}.
 *
 * <p>
 * <b>Two ways to use it.</b> The single steps ({@link #resolveAddress},
 * {@link #resolveRoute}, {@link #connect(QueuePair, CmParameters, byte[])},
 * {@link #listen}, {@link #accept(QueuePair, CmParameters, byte[])}, {@link #reject},
 * {@link #establish}, {@link #disconnect()}) return at once; their outcome arrives as a
 * {@link CmEvent} from {@link #getEvent(Duration)}. The blocking conveniences
 * ({@link #connect(InetSocketAddress, InetSocketAddress, QueuePair, byte[], Duration)},
 * {@link #awaitRequest(Duration)}, {@link #accept(QueuePair, byte[], Duration)},
 * {@link #disconnect(Duration)}) run the same steps and wait for their events: every
 * error event, a timeout, {@link #wakeUp()} and a close from another thread end them with
 * a {@link ConnectionException} (or {@link IllegalStateException} for the close), never a
 * hang.
 *
 * <p>
 * <b>Private data</b> is limited, for RDMA_PS_TCP, to {@value #MAX_CONNECT_PRIVATE_DATA}
 * bytes in a connect (rdma_connect(3)), {@value #MAX_ACCEPT_PRIVATE_DATA} in an accept
 * (rdma_accept(3)) and {@value #MAX_REJECT_PRIVATE_DATA} in a reject (the IB CM REJ
 * message's private data; rdma_reject(3) gives no figure); longer data is refused with
 * {@link IllegalArgumentException} before any call. The receiver gets it padded to those
 * sizes.
 *
 * <p>
 * <b>Threading and lifetime.</b> Thread-safe; one thread at a time should wait for this
 * id's events. {@link #close()} is idempotent and ordered: it wakes a waiting thread
 * (which then throws {@link IllegalStateException}), disconnects a connected id, moves
 * the attached QP to the error state (its outstanding work requests then flush into the
 * application's CQs, which the application drains), and destroys the id
 * ({@code rdma_destroy_id}, which never waits: every event was acknowledged when it was
 * read). The QP itself stays open: the application closes it. A listener's close first
 * rejects ({@code rdma_reject}, no private data) and closes the ids of the connect
 * requests still queued on it (read from the channel, not yet returned by
 * {@link #awaitRequest} or {@link #getEvent}), also those read while it closes: their
 * clients get REJECTED at once. A request already returned is the application's to
 * accept, reject or close.
 */
public final class ConnectionId extends CmObject {

	/** Private data of {@code rdma_connect} on RDMA_PS_TCP: 56 bytes. */
	public static final int MAX_CONNECT_PRIVATE_DATA = 56;

	/** Private data of {@code rdma_accept} on RDMA_PS_TCP: 196 bytes. */
	public static final int MAX_ACCEPT_PRIVATE_DATA = 196;

	/** Private data of {@code rdma_reject} (IB CM REJ): 148 bytes. */
	public static final int MAX_REJECT_PRIVATE_DATA = 148;

	/**
	 * The longest address resolution attempt of {@link #connect} (the timeout rdma-core's
	 * examples pass to {@code rdma_resolve_addr}): a resolution whose neighbour update
	 * the kernel missed ends when its timer fires, so callers of {@link #resolveAddress}
	 * should not give it more either (see {@code connect}).
	 */
	public static final Duration RESOLVE_ATTEMPT = Duration.ofSeconds(2);

	/**
	 * The timeout for the next {@link #resolveAddress} attempt when {@code remaining} is
	 * left: {@link #RESOLVE_ATTEMPT}, or less when less remains.
	 */
	public static Duration resolveAttempt(Duration remaining) {
		return remaining.compareTo(RESOLVE_ATTEMPT) < 0 ? remaining : RESOLVE_ATTEMPT;
	}

	private static final Set<CmEventType> IGNORED_WHILE_WAITING = EnumSet.of(CmEventType.ADDR_CHANGE,
			CmEventType.TIMEWAIT_EXIT);

	private final EventChannel channel;

	private final @Nullable ConnectionId listener;

	final Signal signal = new Signal("the wake-up signal of an rdma_cm id");

	private final ArrayDeque<CmEvent> queue = new ArrayDeque<>();

	private final AtomicBoolean wakeRequested = new AtomicBoolean();

	private volatile @Nullable CmEvent request;

	private volatile @Nullable QueuePair queuePair;

	private volatile boolean connected;

	private volatile boolean disconnected;

	/** See {@link #resolveAttemptsTimedOut()}; written by the connecting thread. */
	private volatile int resolveAttemptsTimedOut;

	ConnectionId(EventChannel channel, MemorySegment id, @Nullable ConnectionId listener) {
		super(id);
		this.channel = channel;
		this.listener = listener;
	}

	/** The channel this id's events arrive on. */
	public EventChannel channel() {
		return channel;
	}

	/** The listener whose connect request created this id, or null. */
	public @Nullable ConnectionId listener() {
		return listener;
	}

	/** The {@link CmEventType#CONNECT_REQUEST} that created this id, or null. */
	public @Nullable CmEvent request() {
		return request;
	}

	/** The QP given to connect or accept, or null. */
	public @Nullable QueuePair queuePair() {
		return queuePair;
	}

	/** True between ESTABLISHED (or rdma_establish) and DISCONNECTED or close. */
	public boolean isConnected() {
		return connected && !disconnected;
	}

	@Override
	String describe() {
		return "ConnectionId@0x" + Long.toHexString(handle.address());
	}

	// ------------------------------------------------------------------ what the id
	// resolved to

	/**
	 * The RDMA device the id is bound to ({@code id->verbs->device->name}), or null
	 * before bind or address resolution.
	 */
	public @Nullable String deviceName() {
		acquire();
		try {
			MemorySegment verbs = handle.get(ADDRESS, RdmacmLayouts.ID_VERBS);
			if (Native.isNull(verbs)) {
				return null;
			}
			MemorySegment device = verbs.reinterpret(Layouts.IBV_CONTEXT.byteSize())
				.get(ADDRESS, Layouts.CONTEXT_DEVICE)
				.reinterpret(Layouts.IBV_DEVICE.byteSize());
			return device.getString(Layouts.off(Layouts.IBV_DEVICE, "name"));
		}
		finally {
			release();
		}
	}

	/** {@code id->port_num} (0 before the id is bound to a device). */
	public int portNumber() {
		acquire();
		try {
			return Byte.toUnsignedInt(handle.get(JAVA_BYTE, RdmacmLayouts.ID_PORT_NUM));
		}
		finally {
			release();
		}
	}

	/** {@code id->route.addr.addr.ibaddr.sgid}: the local GID of the route. */
	public Gid sourceGid() {
		return gid(RdmacmLayouts.ID_SGID);
	}

	/** {@code id->route.addr.addr.ibaddr.dgid}: the remote GID of the route. */
	public Gid destinationGid() {
		return gid(RdmacmLayouts.ID_DGID);
	}

	private Gid gid(long offset) {
		acquire();
		try {
			return new Gid(handle.asSlice(offset, 16).toArray(JAVA_BYTE));
		}
		finally {
			release();
		}
	}

	/**
	 * The local address ({@code rdma_get_local_addr}, an inline of rdma_cma.h), or null
	 * while unbound.
	 */
	public @Nullable InetSocketAddress localAddress() {
		return address(RdmacmLayouts.ID_SRC_ADDR);
	}

	/** The remote address ({@code rdma_get_peer_addr}), or null while unknown. */
	public @Nullable InetSocketAddress peerAddress() {
		return address(RdmacmLayouts.ID_DST_ADDR);
	}

	private @Nullable InetSocketAddress address(long offset) {
		acquire();
		try {
			return fromSockaddr(handle.asSlice(offset, RdmacmLayouts.SOCKADDR_STORAGE.byteSize()));
		}
		finally {
			release();
		}
	}

	// ------------------------------------------------------------------ single steps

	/** {@code rdma_bind_addr}: binds to a local address (port 0: any free port). */
	public void bind(InetSocketAddress address) {
		Objects.requireNonNull(address, "address");
		call("rdma_bind_addr", address.toString(),
				(a, capture) -> (int) Rdmacm.BIND_ADDR.invokeExact(capture, handle, sockaddr(a, address)));
	}

	/**
	 * {@code rdma_listen}: after {@link #bind}; requests arrive as CONNECT_REQUEST
	 * events. Closing the listener rejects the requests read and not yet taken (see the
	 * class comment).
	 */
	public void listen(int backlog) {
		if (backlog < 0) {
			throw new IllegalArgumentException("backlog must be >= 0, got " + backlog);
		}
		call("rdma_listen", "backlog " + backlog,
				(a, capture) -> (int) Rdmacm.LISTEN.invokeExact(capture, handle, backlog));
	}

	/**
	 * {@code rdma_resolve_addr}: resolves {@code destination} (and binds to
	 * {@code source} when given: on a host with several RDMA devices the source picks the
	 * device). Ends with ADDR_RESOLVED or ADDR_ERROR.
	 * @param timeout the CM's own resolution timeout, 1 ms .. Integer.MAX_VALUE ms
	 */
	public void resolveAddress(@Nullable InetSocketAddress source, InetSocketAddress destination, Duration timeout) {
		Objects.requireNonNull(destination, "destination");
		int ms = millis("timeout", timeout);
		call("rdma_resolve_addr", (source == null ? "" : source + " -> ") + destination, (a, capture) -> {
			MemorySegment src = source == null ? MemorySegment.NULL : sockaddr(a, source);
			MemorySegment dst = sockaddr(a, destination);
			return (int) Rdmacm.RESOLVE_ADDR.invokeExact(capture, handle, src, dst, ms);
		});
	}

	/** {@code rdma_resolve_route}: ends with ROUTE_RESOLVED or ROUTE_ERROR. */
	public void resolveRoute(Duration timeout) {
		int ms = millis("timeout", timeout);
		requireDevice("rdma_resolve_route", "resolveAddress and its ADDR_RESOLVED");
		call("rdma_resolve_route", describe(),
				(a, capture) -> (int) Rdmacm.RESOLVE_ROUTE.invokeExact(capture, handle, ms));
	}

	/**
	 * {@code rdma_init_qp_attr(state)} then {@code ibv_modify_qp} with the attributes and
	 * mask the CM computed: INIT (port, P_Key, access), RTR (path, remote QPN and PSN,
	 * responder resources) or RTS (PSN, timeout, retries, initiator depth); ERR is a
	 * plain state change. RTR needs the remote side's answer (CONNECT_RESPONSE on the
	 * active side, a CONNECT_REQUEST on the passive side). On the passive side (the id of
	 * a request) RTR's responder resources ({@code max_dest_rd_atomic}, the client's
	 * initiator depth) are lowered to the device's {@code max_qp_rd_atom}, as librdmacm's
	 * {@code rdma_accept} does: the value that an accept with
	 * {@link CmParameters#DEFAULTS} sends back to the client. An accept with explicit
	 * {@code responderResources} should not give more than the QP got here.
	 * @throws IllegalArgumentException when the QP is not on this id's device
	 */
	public void moveQueuePair(QueuePair qp, QueuePair.State state) {
		Objects.requireNonNull(qp, "qp");
		Objects.requireNonNull(state, "state");
		if (state == QueuePair.State.ERR) {
			qp.moveToError();
			return;
		}
		if (state != QueuePair.State.INIT && state != QueuePair.State.RTR && state != QueuePair.State.RTS) {
			throw new IllegalArgumentException("moveQueuePair moves a QP to INIT, RTR, RTS or ERR, not " + state);
		}
		requireSameDevice(qp);
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
			MemorySegment mask = a.allocate(JAVA_INT);
			MemorySegment capture = Native.allocateCapture(a);
			attr.set(JAVA_INT, Layouts.off(Layouts.IBV_QP_ATTR, "qp_state"), state.ordinal());
			int rc = (int) Rdmacm.INIT_QP_ATTR.invokeExact(capture, handle, attr, mask);
			if (rc != 0) {
				throw new VerbsException("rdma_init_qp_attr", Native.errno(capture), describe() + " for " + state);
			}
			int m = mask.get(JAVA_INT, 0);
			if (state == QueuePair.State.RTR && listener != null) {
				clampResponderResources(attr, m, qp.protectionDomain().context().queryDevice().maxQpRdAtom());
			}
			QueuePairAccess.Holder.get().modify(qp, attr, m, state + " (rdma_init_qp_attr)");
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/** {@code IBV_QP_MAX_DEST_RD_ATOMIC} of {@code enum ibv_qp_attr_mask}. */
	static final int QP_MAX_DEST_RD_ATOMIC = 1 << 17;

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

	/**
	 * {@code rdma_connect} with {@code qp}'s number in {@code conn_param.qp_num}: after
	 * ROUTE_RESOLVED and with the QP in INIT. Ends with CONNECT_RESPONSE (then move the
	 * QP to RTR and RTS and call {@link #establish()}), or REJECTED / UNREACHABLE /
	 * CONNECT_ERROR.
	 */
	public void connect(QueuePair qp, CmParameters parameters, byte[] privateData) {
		Objects.requireNonNull(qp, "qp");
		Objects.requireNonNull(parameters, "parameters");
		checkPrivateData("rdma_connect", privateData, MAX_CONNECT_PRIVATE_DATA);
		requireDevice("rdma_connect", "resolveAddress and resolveRoute");
		requireSameDevice(qp);
		queuePair = qp;
		call("rdma_connect", "qp_num " + qp.qpNum(), (a, capture) -> (int) Rdmacm.CONNECT.invokeExact(capture, handle,
				connParam(a, qp, parameters, privateData)));
	}

	/**
	 * {@code rdma_accept} of the request that created this id, with {@code qp}'s number:
	 * with the QP already in RTR (or RTS). Ends with ESTABLISHED (or CONNECT_ERROR).
	 */
	public void accept(QueuePair qp, CmParameters parameters, byte[] privateData) {
		Objects.requireNonNull(qp, "qp");
		Objects.requireNonNull(parameters, "parameters");
		checkPrivateData("rdma_accept", privateData, MAX_ACCEPT_PRIVATE_DATA);
		requireDevice("rdma_accept", "a CONNECT_REQUEST (accept is for the id of a request)");
		requireSameDevice(qp);
		queuePair = qp;
		call("rdma_accept", "qp_num " + qp.qpNum(), (a, capture) -> (int) Rdmacm.ACCEPT.invokeExact(capture, handle,
				connParam(a, qp, parameters, privateData)));
	}

	/**
	 * {@code rdma_reject} of the request that created this id, with private data the
	 * client receives in its REJECTED event. Close this id afterwards.
	 */
	public void reject(byte[] privateData) {
		checkPrivateData("rdma_reject", privateData, MAX_REJECT_PRIVATE_DATA);
		call("rdma_reject", privateData.length + " bytes of private data", (a, capture) -> {
			MemorySegment data = privateData.length == 0 ? MemorySegment.NULL : a.allocateFrom(JAVA_BYTE, privateData);
			return (int) Rdmacm.REJECT.invokeExact(capture, handle, data, (byte) privateData.length);
		});
	}

	/**
	 * {@code rdma_establish}: completes an active connection after CONNECT_RESPONSE, with
	 * the QP in RTS (no QP was created by librdmacm on this id).
	 */
	public void establish() {
		call("rdma_establish", describe(), (a, capture) -> (int) Rdmacm.ESTABLISH.invokeExact(capture, handle));
		connected = true;
	}

	/**
	 * Moves the attached QP to the error state (as librdmacm does for its own QPs), then
	 * {@code rdma_disconnect}: both sides get DISCONNECTED.
	 */
	public void disconnect() {
		QueuePair qp = queuePair;
		if (qp != null && !qp.isClosed()) {
			try {
				qp.moveToError();
			}
			catch (IllegalStateException closedMeanwhile) {
				// the application closed its QP: nothing to flush
			}
		}
		call("rdma_disconnect", describe(), (a, capture) -> (int) Rdmacm.DISCONNECT.invokeExact(capture, handle));
	}

	// ------------------------------------------------------------------ events

	/**
	 * The next event of this id, waiting up to {@code timeout} for it: null on timeout or
	 * after {@link #wakeUp()}. The event is already acknowledged. Reads the channel
	 * ({@code rdma_get_cm_event}, non-blocking) at least once, also with a zero timeout:
	 * an event already waiting on the channel is returned without waiting.
	 * @throws IllegalStateException when the id is closed, before or during the wait
	 */
	public @Nullable CmEvent getEvent(Duration timeout) {
		return next(System.nanoTime() + timeout.toNanos());
	}

	/**
	 * Wakes the thread waiting in {@link #getEvent} (it returns null) or in a blocking
	 * step (it throws {@link ConnectionException}); a wake-up with nobody waiting ends
	 * the next wait.
	 */
	public void wakeUp() {
		wakeRequested.set(true);
		signal.raise();
	}

	private @Nullable CmEvent next(long deadline) {
		acquire();
		try {
			boolean looked = false;
			while (true) {
				synchronized (queue) {
					CmEvent e = queue.poll();
					if (e != null) {
						return e;
					}
				}
				if (closing()) {
					throw new IllegalStateException(
							describe() + " was closed by another thread while waiting for " + "an rdma_cm event");
				}
				if (wakeRequested.getAndSet(false)) {
					return null;
				}
				long left = deadline - System.nanoTime();
				if (left <= 0 && looked) {
					return null;
				}
				// look at the channel at least once, also with a zero timeout: an event
				// already there is read even when no other thread pumps
				channel.pump(this, Math.max(0, left));
				looked = true;
			}
		}
		finally {
			release();
		}
	}

	/** The events queued on this id and not yet taken (for tests and diagnostics). */
	int queuedEvents() {
		synchronized (queue) {
			return queue.size();
		}
	}

	void deliver(CmEvent event) {
		switch (event.type()) {
			case ESTABLISHED -> connected = true;
			case DISCONNECTED, DEVICE_REMOVAL -> disconnected = true;
			default -> {
			}
		}
		if (event.type() == CmEventType.CONNECT_REQUEST && event.id() != this) {
			event.id().request = event;
		}
		synchronized (queue) {
			queue.add(event);
		}
		signal.raise();
	}

	/**
	 * Waits for one of {@code wanted}; any error event, DISCONNECTED, a timeout or a
	 * wake-up throws {@link ConnectionException}.
	 */
	private CmEvent await(String verb, String what, long deadline, Duration timeout, CmEventType... wanted) {
		while (true) {
			CmEvent e;
			try {
				e = next(deadline);
			}
			catch (IllegalStateException closed) {
				throw new IllegalStateException(verb + " " + what + ": " + closed.getMessage(), closed);
			}
			if (e == null) {
				if (System.nanoTime() - deadline >= 0) {
					throw new ConnectionException(verb, what + ": no " + Arrays.toString(wanted) + " within " + timeout,
							null);
				}
				throw new ConnectionException(verb, what + ": woken up by another thread (wakeUp)", null);
			}
			for (CmEventType w : wanted) {
				if (e.type() == w) {
					return e;
				}
			}
			if (!IGNORED_WHILE_WAITING.contains(e.type())) {
				throw new ConnectionException(verb, what + ": " + e.text() + ", " + e.statusText()
						+ (e.privateData().length > 0 ? ", " + e.privateData().length + " bytes of private data" : ""),
						e);
			}
		}
	}

	// ------------------------------------------------------------------ blocking
	// conveniences

	/**
	 * Connects {@code qp} to the listener at {@code destination}, within {@code timeout}:
	 * resolve address (from {@code source} when given) and route, QP to INIT,
	 * {@code rdma_connect}, CONNECT_RESPONSE, QP to RTR and RTS, {@code rdma_establish}.
	 * Returns the server's answer (its private data). On failure the id is left for the
	 * caller to close (which also moves the QP to the error state).
	 * @throws ConnectionException on ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, REJECTED (with
	 * the server's private data), CONNECT_ERROR, timeout or {@link #wakeUp()}
	 * @throws IllegalStateException when the id is closed by another thread meanwhile
	 */
	public CmEvent connect(InetSocketAddress destination, @Nullable InetSocketAddress source, QueuePair qp,
			byte[] privateData, Duration timeout) {
		Objects.requireNonNull(destination, "destination");
		Objects.requireNonNull(qp, "qp");
		checkPrivateData("rdma_connect", privateData, MAX_CONNECT_PRIVATE_DATA);
		long deadline = System.nanoTime() + timeout.toNanos();
		String what = "to " + destination;
		resolveAddressWithin(source, destination, deadline, timeout, what);
		resolveRoute(remaining(deadline));
		await("rdma_resolve_route", what, deadline, timeout, CmEventType.ROUTE_RESOLVED);
		moveQueuePair(qp, QueuePair.State.INIT);
		connect(qp, CmParameters.DEFAULTS, privateData);
		CmEvent response = await("rdma_connect", what, deadline, timeout, CmEventType.CONNECT_RESPONSE,
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

	/**
	 * {@code rdma_resolve_addr} and its ADDR_RESOLVED before {@code deadline}, in
	 * attempts of at most {@link #RESOLVE_ATTEMPT} (the timeout rdma-core's examples
	 * pass), the next one after an ADDR_ERROR with ETIMEDOUT. The kernel resolves the
	 * neighbour's hardware address when a neighbour update arrives, and looks again when
	 * the attempt's timer fires. An update that arrives before the request is queued (an
	 * ARP reply over a veth pair does, on a first contact) is missed: with the whole
	 * connect timeout as the attempt's, the address then resolved only when that ran out,
	 * so the connect failed; now it resolves after one attempt's time. A neighbour still
	 * unresolved then ends the attempt in ETIMEDOUT, and the next attempt asks again
	 * while time remains. Every other ADDR_ERROR ends the connect at once.
	 */
	private void resolveAddressWithin(@Nullable InetSocketAddress source, InetSocketAddress destination, long deadline,
			Duration timeout, String what) {
		CmEvent timedOut = null;
		while (true) {
			resolveAddress(source, destination, resolveAttempt(remaining(deadline)));
			try {
				await("rdma_resolve_addr", what, deadline, timeout, CmEventType.ADDR_RESOLVED);
				return;
			}
			catch (ConnectionException e) {
				CmEvent event = e.event();
				boolean late = System.nanoTime() - deadline >= 0;
				if (event == null && late && timedOut != null) {
					// the last attempt's own ETIMEDOUT comes with the deadline: name the
					// earlier ones' (nobody answered for the address)
					throw new ConnectionException("rdma_resolve_addr",
							what + ": no ADDR_RESOLVED within " + timeout + "; " + resolveAttemptsTimedOut
									+ " attempt(s) of " + RESOLVE_ATTEMPT + " before ended in " + timedOut.text() + ", "
									+ timedOut.statusText(),
							timedOut);
				}
				if (event == null || event.type() != CmEventType.ADDR_ERROR || event.status() != -Errno.ETIMEDOUT
						|| late) {
					throw e;
				}
				timedOut = event;
				resolveAttemptsTimedOut++;
			}
		}
	}

	/**
	 * On a listener: waits up to {@code timeout} for a connect request and returns the
	 * new id of that request (its {@link #request()} holds the client's private data).
	 * Accept it with {@link #accept(QueuePair, byte[], Duration)}, or {@link #reject} and
	 * close it.
	 * @throws ConnectionException on timeout, wake-up or an error event of the listener
	 * (DEVICE_REMOVAL)
	 */
	public ConnectionId awaitRequest(Duration timeout) {
		CmEvent e = await("rdma_listen", "on " + localAddress(), System.nanoTime() + timeout.toNanos(), timeout,
				CmEventType.CONNECT_REQUEST);
		return e.id();
	}

	/**
	 * On the id of a connect request: moves {@code qp} to INIT, RTR and RTS with the CM's
	 * attributes, {@code rdma_accept}s with {@code privateData} and waits up to
	 * {@code timeout} for ESTABLISHED.
	 * @throws ConnectionException on CONNECT_ERROR, DISCONNECTED, timeout or wake-up
	 */
	public CmEvent accept(QueuePair qp, byte[] privateData, Duration timeout) {
		Objects.requireNonNull(qp, "qp");
		checkPrivateData("rdma_accept", privateData, MAX_ACCEPT_PRIVATE_DATA);
		long deadline = System.nanoTime() + timeout.toNanos();
		moveQueuePair(qp, QueuePair.State.INIT);
		moveQueuePair(qp, QueuePair.State.RTR);
		moveQueuePair(qp, QueuePair.State.RTS);
		accept(qp, CmParameters.DEFAULTS, privateData);
		return await("rdma_accept", "from " + peerAddress(), deadline, timeout, CmEventType.ESTABLISHED);
	}

	/**
	 * {@link #disconnect()}, then waits up to {@code timeout} for DISCONNECTED (at once
	 * when the peer disconnected first).
	 * @throws ConnectionException on timeout or wake-up
	 */
	public void disconnect(Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		// also after the peer's DREQ: rdma_disconnect then answers it (DREP), which the
		// peer's own rdma_disconnect waits for; the one DISCONNECTED of the id has come
		boolean peerFirst = disconnected;
		disconnect();
		if (peerFirst) {
			return;
		}
		synchronized (queue) {
			if (queue.removeIf(e -> e.type() == CmEventType.DISCONNECTED)) {
				return;
			}
		}
		await("rdma_disconnect", describe(), deadline, timeout, CmEventType.DISCONNECTED);
	}

	/**
	 * Waits up to {@code timeout} for the peer to disconnect (DISCONNECTED), then answers
	 * it at once with {@link #disconnect()} (the attached QP to error,
	 * {@code rdma_disconnect} sending the DREP): the peer's own {@code rdma_disconnect}
	 * waits for that answer (librdmacm's synchronous ids, such as {@code rdma_client}'s,
	 * block in it) and would otherwise only end at the CM's DREQ timeout. Returns the
	 * event.
	 *
	 * <p>
	 * The id is held open from the wait to the answer: a {@link #close()} (of this id or
	 * of its channel) from another thread before the DISCONNECTED event ends this call
	 * with {@link IllegalStateException}; one after the event waits until the answer is
	 * sent (one {@code rdma_disconnect}), and this call then returns the event.
	 * @throws ConnectionException on timeout, wake-up or another event
	 * @throws IllegalStateException when the id is (being) closed before DISCONNECTED
	 */
	public CmEvent awaitDisconnect(Duration timeout) {
		acquire();
		try {
			CmEvent e = await("rdma_disconnect (by the peer)", describe(), System.nanoTime() + timeout.toNanos(),
					timeout, CmEventType.DISCONNECTED);
			Runnable hook = beforeAnswer;
			if (hook != null) {
				hook.run();
			}
			QueuePair qp = queuePair;
			if (qp != null && !qp.isClosed()) {
				try {
					qp.moveToError();
				}
				catch (RuntimeException closedMeanwhile) {
					// the application closed its QP, or it is in error already:
					// nothing to flush
				}
			}
			// the answer; an error here (the id already disconnected by this side)
			// changes nothing for the caller, who got the peer's DISCONNECTED
			disconnectQuietly();
			return e;
		}
		finally {
			release();
		}
	}

	/**
	 * Tests only: run by {@link #awaitDisconnect} between the DISCONNECTED event and its
	 * answer (a close from another thread must wait there). Null in production.
	 */
	static volatile @Nullable Runnable beforeAnswer;

	// ------------------------------------------------------------------ lifecycle

	@Override
	void beforeClose() {
		signal.raise();
	}

	@Override
	void destroy() {
		if (connected) {
			try {
				disconnectQuietly();
			}
			catch (RuntimeException ignored) {
				// the peer or the device went away: destroying the id is all that is left
			}
		}
		QueuePair qp = queuePair;
		if (qp != null && !qp.isClosed()) {
			try {
				qp.moveToError();
			}
			catch (RuntimeException ignored) {
				// closed by the application meanwhile, or already in error
			}
		}
		while (true) {
			List<ConnectionId> requests;
			synchronized (channel.eventLock) {
				// under the event lock: no event of this id is between get and delivery
				requests = takeQueuedRequests();
				if (requests.isEmpty()) {
					destroyId();
					break;
				}
			}
			// a listener's dependants first, outside the event lock (their close takes
			// it); then look again: a request read meanwhile is queued by now
			rejectAndClose(requests);
		}
		channel.forget(this);
		signal.close();
	}

	private void destroyId() {
		try (Arena a = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(a);
			int rc = (int) Rdmacm.DESTROY_ID.invokeExact(capture, handle);
			if (rc != 0) {
				throw new VerbsException("rdma_destroy_id", Native.errno(capture), describe());
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * Removes the connect requests nobody took from this listener's queue and returns
	 * their ids (none for an id that does not listen).
	 */
	private List<ConnectionId> takeQueuedRequests() {
		List<ConnectionId> requests = new ArrayList<>();
		synchronized (queue) {
			queue.removeIf(e -> {
				if (e.type() == CmEventType.CONNECT_REQUEST && e.id() != this) {
					requests.add(e.id());
					return true;
				}
				return false;
			});
		}
		return requests;
	}

	/**
	 * {@code rdma_reject} (no private data) and close of the ids of requests left on a
	 * closing listener: the client's connect ends with REJECTED instead of its timeout. A
	 * reject that fails (the client gave up, the id is being closed by its channel) is
	 * ignored; the first close that fails is thrown after all were tried.
	 */
	private static void rejectAndClose(List<ConnectionId> requests) {
		RuntimeException failure = null;
		for (ConnectionId r : requests) {
			try {
				r.reject(new byte[0]);
			}
			catch (RuntimeException ignored) {
				// nothing to answer any more: the id is still closed below
			}
			try {
				r.close();
			}
			catch (RuntimeException e) {
				if (failure == null) {
					failure = e;
				}
				else {
					failure.addSuppressed(e);
				}
			}
		}
		if (failure != null) {
			throw failure;
		}
	}

	/**
	 * {@code rdma_disconnect}, its result ignored; the caller holds the id
	 * ({@link #acquire()}, or {@link #destroy()} with no call in flight).
	 */
	private void disconnectQuietly() {
		try (Arena a = Arena.ofConfined()) {
			int ignored = (int) Rdmacm.DISCONNECT.invokeExact(Native.allocateCapture(a), handle);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	// ------------------------------------------------------------------ helpers

	@FunctionalInterface
	private interface Call {

		int invoke(Arena arena, MemorySegment capture) throws Throwable;

	}

	/** A librdmacm call returning 0 or -1 + errno, holding the id open for it. */
	private void call(String verb, String detail, Call call) {
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(a);
			if (call.invoke(a, capture) != 0) {
				throw new VerbsException(verb, Native.errno(capture), detail);
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
	 * librdmacm dereferences {@code id->verbs} (and the device behind it) in
	 * rdma_resolve_route, rdma_connect and rdma_accept without checking it: before the id
	 * is bound to a device such a call would crash the process, so it is refused here.
	 */
	private void requireDevice(String verb, String needed) {
		acquire();
		try {
			if (Native.isNull(handle.get(ADDRESS, RdmacmLayouts.ID_VERBS))) {
				throw new VerbsException(verb, dev.rdma.verbs.Errno.EINVAL,
						describe() + " is not bound to an RDMA device yet: " + verb + " needs " + needed + " first");
			}
		}
		finally {
			release();
		}
	}

	private void requireSameDevice(QueuePair qp) {
		String mine = deviceName();
		String its = qp.protectionDomain().context().deviceName();
		if (mine != null && !mine.equals(its)) {
			throw new IllegalArgumentException(qp + " is on device " + its + ", but " + describe()
					+ " resolved to device " + mine + ": create the QP on " + mine);
		}
	}

	static void checkPrivateData(String verb, byte[] privateData, int max) {
		Objects.requireNonNull(privateData, "privateData");
		if (privateData.length > max) {
			throw new IllegalArgumentException("privateData of " + verb + " is limited to " + max
					+ " bytes on RDMA_PS_TCP, got " + privateData.length);
		}
	}

	private static int millis(String name, Duration d) {
		long ms = d.toMillis();
		if (ms < 1 || ms > Integer.MAX_VALUE) {
			throw new IllegalArgumentException(name + " must be 1 ms .. " + Integer.MAX_VALUE + " ms, got " + d);
		}
		return (int) ms;
	}

	/**
	 * Address resolution attempts of {@link #connect} that ended in ADDR_ERROR with
	 * ETIMEDOUT and were repeated (for tests and diagnostics).
	 */
	int resolveAttemptsTimedOut() {
		return resolveAttemptsTimedOut;
	}

	private static Duration remaining(long deadline) {
		return Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
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
		return param;
	}

	/**
	 * A {@code struct sockaddr_in} or {@code sockaddr_in6} of {@code address} (port and
	 * address in network byte order).
	 * @throws IllegalArgumentException for an unresolved host name
	 */
	static MemorySegment sockaddr(Arena a, InetSocketAddress address) {
		InetAddress ip = address.getAddress();
		if (address.isUnresolved() || ip == null) {
			throw new IllegalArgumentException("address " + address + " is unresolved: pass an IP address");
		}
		MemorySegment s = a.allocate(RdmacmLayouts.SOCKADDR_STORAGE);
		short port = Short.reverseBytes((short) address.getPort());
		if (ip instanceof Inet4Address) {
			var l = RdmacmLayouts.SOCKADDR_IN;
			s.set(JAVA_SHORT, Layouts.off(l, "sin_family"), (short) RdmacmLayouts.AF_INET);
			s.set(JAVA_SHORT, Layouts.off(l, "sin_port"), port);
			MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, s, Layouts.off(l, "sin_addr"), 4);
		}
		else {
			var l = RdmacmLayouts.SOCKADDR_IN6;
			s.set(JAVA_SHORT, Layouts.off(l, "sin6_family"), (short) RdmacmLayouts.AF_INET6);
			s.set(JAVA_SHORT, Layouts.off(l, "sin6_port"), port);
			MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, s, Layouts.off(l, "sin6_addr"), 16);
			s.set(JAVA_INT, Layouts.off(l, "sin6_scope_id"), ((Inet6Address) ip).getScopeId());
		}
		return s;
	}

	/**
	 * The address in a {@code struct sockaddr_storage}, or null for AF_UNSPEC (unbound).
	 */
	static @Nullable InetSocketAddress fromSockaddr(MemorySegment s) {
		int family = Short.toUnsignedInt(s.get(JAVA_SHORT, 0));
		try {
			if (family == RdmacmLayouts.AF_INET) {
				var l = RdmacmLayouts.SOCKADDR_IN;
				int port = Short.toUnsignedInt(Short.reverseBytes(s.get(JAVA_SHORT, Layouts.off(l, "sin_port"))));
				byte[] ip = s.asSlice(Layouts.off(l, "sin_addr"), 4).toArray(JAVA_BYTE);
				return new InetSocketAddress(InetAddress.getByAddress(ip), port);
			}
			if (family == RdmacmLayouts.AF_INET6) {
				var l = RdmacmLayouts.SOCKADDR_IN6;
				int port = Short.toUnsignedInt(Short.reverseBytes(s.get(JAVA_SHORT, Layouts.off(l, "sin6_port"))));
				byte[] ip = s.asSlice(Layouts.off(l, "sin6_addr"), 16).toArray(JAVA_BYTE);
				return new InetSocketAddress(InetAddress.getByAddress(ip), port);
			}
		}
		catch (UnknownHostException e) {
			throw new IllegalStateException(e);
		}
		return null;
	}

	static {
		// sockaddr ports are big-endian; this binding runs on little-endian x86_64 only
		if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
			throw new ExceptionInInitializerError("rdma-bindings supports x86_64 (little-endian) only");
		}
	}

}
