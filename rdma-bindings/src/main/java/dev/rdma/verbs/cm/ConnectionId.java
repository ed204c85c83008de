package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.Gid;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Rdmacm;
import dev.rdma.verbs.ffm.RdmacmLayouts;

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
 * {@code rdma_conn_param.qp_num} (and {@code .srq}, for a QP on a shared receive queue).
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

	private final EventChannel channel;

	private final @Nullable ConnectionId listener;

	/** The id's event queue and its waits. */
	final IdEvents events = new IdEvents(this);

	/** Bind, address and route resolution, what the id resolved to. */
	final AddressResolution resolution = new AddressResolution(this);

	/** Listen, connect, accept, reject, establish, disconnect and the QP's moves. */
	final Handshake handshake = new Handshake(this);

	/** Set by the CONNECT_REQUEST that created this id. */
	volatile @Nullable CmEvent request;

	/** Set by ESTABLISHED or rdma_establish. */
	volatile boolean connected;

	/** Set by DISCONNECTED or DEVICE_REMOVAL. */
	volatile boolean disconnected;

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
		return handshake.queuePair();
	}

	/** True between ESTABLISHED (or rdma_establish) and DISCONNECTED or close. */
	public boolean isConnected() {
		return connected && !disconnected;
	}

	@Override
	String describe() {
		return "ConnectionId@0x" + Long.toHexString(handle.address());
	}

	// ---------------------------------------------------- what the id resolved to

	/**
	 * The RDMA device the id is bound to ({@code id->verbs->device->name}), or null
	 * before bind or address resolution.
	 */
	public @Nullable String deviceName() {
		return resolution.deviceName();
	}

	/** {@code id->port_num} (0 before the id is bound to a device). */
	public int portNumber() {
		return resolution.portNumber();
	}

	/** {@code id->route.addr.addr.ibaddr.sgid}: the local GID of the route. */
	public Gid sourceGid() {
		return resolution.gid(RdmacmLayouts.ID_SGID);
	}

	/** {@code id->route.addr.addr.ibaddr.dgid}: the remote GID of the route. */
	public Gid destinationGid() {
		return resolution.gid(RdmacmLayouts.ID_DGID);
	}

	/**
	 * The local address ({@code rdma_get_local_addr}, an inline of rdma_cma.h), or null
	 * while unbound.
	 */
	public @Nullable InetSocketAddress localAddress() {
		return resolution.address(RdmacmLayouts.ID_SRC_ADDR);
	}

	/** The remote address ({@code rdma_get_peer_addr}), or null while unknown. */
	public @Nullable InetSocketAddress peerAddress() {
		return resolution.address(RdmacmLayouts.ID_DST_ADDR);
	}

	// ------------------------------------------------------------------ single steps

	/** {@code rdma_bind_addr}: binds to a local address (port 0: any free port). */
	public void bind(InetSocketAddress address) {
		resolution.bind(address);
	}

	/**
	 * {@code rdma_listen}: after {@link #bind}; requests arrive as CONNECT_REQUEST
	 * events. Closing the listener rejects the requests read and not yet taken (see the
	 * class comment).
	 */
	public void listen(int backlog) {
		handshake.listen(backlog);
	}

	/**
	 * {@code rdma_resolve_addr}: resolves {@code destination} (and binds to
	 * {@code source} when given: on a host with several RDMA devices the source picks the
	 * device). Ends with ADDR_RESOLVED or ADDR_ERROR.
	 * @param timeout the CM's own resolution timeout, 1 ms .. Integer.MAX_VALUE ms
	 */
	public void resolveAddress(@Nullable InetSocketAddress source, InetSocketAddress destination, Duration timeout) {
		resolution.resolveAddress(source, destination, timeout);
	}

	/** {@code rdma_resolve_route}: ends with ROUTE_RESOLVED or ROUTE_ERROR. */
	public void resolveRoute(Duration timeout) {
		resolution.resolveRoute(timeout);
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
		handshake.moveQueuePair(qp, state);
	}

	/**
	 * {@code rdma_connect} with {@code qp}'s number in {@code conn_param.qp_num}: after
	 * ROUTE_RESOLVED and with the QP in INIT. Ends with CONNECT_RESPONSE (then move the
	 * QP to RTR and RTS and call {@link #establish()}), or REJECTED / UNREACHABLE /
	 * CONNECT_ERROR.
	 */
	public void connect(QueuePair qp, CmParameters parameters, byte[] privateData) {
		handshake.connect(qp, parameters, privateData);
	}

	/**
	 * {@code rdma_accept} of the request that created this id, with {@code qp}'s number:
	 * with the QP already in RTR (or RTS). Ends with ESTABLISHED (or CONNECT_ERROR).
	 */
	public void accept(QueuePair qp, CmParameters parameters, byte[] privateData) {
		handshake.accept(qp, parameters, privateData);
	}

	/**
	 * {@code rdma_reject} of the request that created this id, with private data the
	 * client receives in its REJECTED event. Close this id afterwards.
	 */
	public void reject(byte[] privateData) {
		handshake.reject(privateData);
	}

	/**
	 * {@code rdma_establish}: completes an active connection after CONNECT_RESPONSE, with
	 * the QP in RTS (no QP was created by librdmacm on this id).
	 */
	public void establish() {
		handshake.establish();
	}

	/**
	 * Moves the attached QP to the error state (as librdmacm does for its own QPs), then
	 * {@code rdma_disconnect}: both sides get DISCONNECTED.
	 */
	public void disconnect() {
		handshake.disconnect();
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
		return events.next(System.nanoTime() + timeout.toNanos());
	}

	/**
	 * Wakes the thread waiting in {@link #getEvent} (it returns null) or in a blocking
	 * step (it throws {@link ConnectionException}); a wake-up with nobody waiting ends
	 * the next wait.
	 */
	public void wakeUp() {
		events.wakeUp();
	}

	/** The events queued on this id and not yet taken (for tests and diagnostics). */
	int queuedEvents() {
		return events.size();
	}

	// ---------------------------------------------------- blocking conveniences

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
		return handshake.connect(destination, source, qp, privateData, timeout);
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
		return handshake.awaitRequest(timeout);
	}

	/**
	 * On the id of a connect request: moves {@code qp} to INIT, RTR and RTS with the CM's
	 * attributes, {@code rdma_accept}s with {@code privateData} and waits up to
	 * {@code timeout} for ESTABLISHED.
	 * @throws ConnectionException on CONNECT_ERROR, DISCONNECTED, timeout or wake-up
	 */
	public CmEvent accept(QueuePair qp, byte[] privateData, Duration timeout) {
		return handshake.accept(qp, privateData, timeout);
	}

	/**
	 * {@link #disconnect()}, then waits up to {@code timeout} for DISCONNECTED (at once
	 * when the peer disconnected first, or when the connection never reached ESTABLISHED:
	 * no DISCONNECTED comes then).
	 * @throws ConnectionException on timeout or wake-up
	 */
	public void disconnect(Duration timeout) {
		handshake.disconnect(timeout);
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
		return handshake.awaitDisconnect(timeout);
	}

	/**
	 * Address resolution attempts of {@link #connect} that ended in ADDR_ERROR with
	 * ETIMEDOUT and were repeated (for tests and diagnostics).
	 */
	int resolveAttemptsTimedOut() {
		return resolution.attemptsTimedOut();
	}

	/**
	 * Tests only: run by {@link #awaitDisconnect} between the DISCONNECTED event and its
	 * answer (a close from another thread must wait there). Null in production.
	 */
	static volatile @Nullable Runnable beforeAnswer;

	// ------------------------------------------------------------------ lifecycle

	@Override
	void beforeClose() {
		events.signal.raise();
	}

	@Override
	void destroy() {
		if (connected) {
			try {
				handshake.disconnectQuietly();
			}
			catch (RuntimeException ignored) {
				// the peer or the device went away: destroying the id is all that is left
			}
		}
		handshake.queuePairToErrorQuietly();
		while (true) {
			List<ConnectionId> requests;
			synchronized (channel.eventLock) {
				// under the event lock: no event of this id is between get and delivery
				requests = events.takeQueuedRequests();
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
		events.signal.close();
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

	/** A librdmacm call of {@link #call}. */
	@FunctionalInterface
	interface Call {

		int invoke(Arena arena, MemorySegment capture) throws Throwable;

	}

	/**
	 * A librdmacm call returning 0 or -1 + errno, holding the id open for it; a failure
	 * throws {@link VerbsException} naming {@code verb}, the errno and {@code detail}.
	 */
	void call(String verb, String detail, Call call) {
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

}
