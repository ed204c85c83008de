package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.event.RdmaConnectionEstablishedEvent;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.SharedReceiveQueue;

/**
 * A {@code listen} connection: binds and listens when the application starts (a bad
 * address fails startup), then a thread of its own ({@code rdma-accept-<name>}) accepts
 * up to {@code max-peers} peers at once (more are turned away) and, at least every 100
 * ms, notices each peer's end, for as long as the application runs. How it listens,
 * accepts one peer and notices its end is its {@link ServerTransport}'s: rdma_cm
 * ({@link RdmaCmServerTransport}) or the TCP exchange of {@code exchange: out-of-band}
 * ({@link OutOfBandServerTransport}). Peers being accepted (rdma_cm: accepted, waiting
 * for ESTABLISHED, {@link ServerTransport#pendingPeers}) count against {@code max-peers};
 * the thread does not wait for them, so a half-open peer holds up no other peer's accept.
 *
 * <p>
 * <b>A peer's end</b> (an rdma_cm event, the out-of-band link's end, or a failed
 * completion of its QP, which wakes the thread): the peer is DISCONNECTED and closed (QP
 * to error, flushed work requests drained through the pollers, QP, buffers and link
 * destroyed). Stopping wakes the thread (and an accept in progress: a peer accepted once
 * stopping began is closed, never listed), waits up to half the shutdown timeout for it,
 * closes every peer, then the listener.
 *
 * <p>
 * <b>Admission</b> ({@link PeerAdmission}): before anything is made for a peer, its
 * address must be in {@code allowed-peers} (when set), its private data well-formed
 * (rdma_cm) and every {@link dev.rdma.spring.connection.RdmaConnectionFilter} bean must
 * let it through; else it is rejected with the reason in the reject's private data (out
 * of band: its TCP connection closed before any record), counted in
 * {@code rdma.connection.rejected} and logged at most once per
 * {@link RefusalLog#INTERVAL} (with the count of refusals not logged), as
 * {@code max-peers} refusals are.
 *
 * <p>
 * <b>Events</b> (published on that thread): established once a peer is listed, ended once
 * a peer is closed, refused when admission or {@code max-peers} turn a peer away or an
 * accept fails. A peer's {@code disconnect()} wakes the thread, which closes it as an
 * end.
 *
 * <p>
 * <b>Shared receive queue</b> ({@code shared-receive-queue.enabled}): made when it
 * starts, after the protection domain, every peer's QP is created on it and it outlives
 * them all ({@link SharedReceives}); closed after the last peer.
 *
 * <p>
 * As an {@link RdmaConnection}, the server sends to its one peer; with none, or several,
 * reply through {@code message.connection()} or pick one of {@link #peers()}.
 */
public final class ServerConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(ServerConnection.class);

	private final ServerTransport transport;

	private final List<PeerConnection> peers = new CopyOnWriteArrayList<>();

	private final RefusalLog refusals = new RefusalLog(RefusalLog.INTERVAL);

	private volatile PeerAdmission admission;

	/** The shared receive queue while started, or null (none configured). */
	private volatile @Nullable SharedReceives shared;

	public ServerConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		super(settings, sendCq, receiveCq, routers, listener);
		this.transport = ServerTransport.of(settings);
		this.admission = PeerAdmission.open(settings.name());
	}

	/**
	 * Who this server accepts ({@code allowed-peers}, the filter beans); set before it
	 * starts (the registry), every peer by default.
	 */
	public void admission(PeerAdmission admission) {
		this.admission = admission;
	}

	@Override
	synchronized void start() {
		if (running) {
			return;
		}
		admission.resolve();
		transport.listen(this);
		if (settings.sharedReceive() != null) {
			openSharedReceives();
		}
		state = ConnectionState.LISTENING;
		logger.info("RDMA connection '" + name() + "' listening " + transport.describeListening(this));
		startThread("rdma-accept-", this::run);
	}

	/**
	 * Creates the shared receive queue in the protection domain {@link #transport} made;
	 * on failure closes the listener and the PD and fails startup naming the property.
	 */
	private void openSharedReceives() {
		String property = "rdma.connections." + name() + ".shared-receive-queue.depth";
		ConnectionSettings.SharedReceive config = Objects.requireNonNull(settings.sharedReceive());
		try {
			shared = SharedReceives.open(settings, Objects.requireNonNull(pd), routers());
		}
		catch (RuntimeException ex) {
			transport.close();
			closeShared();
			throw new RdmaConfigurationException(property,
					property + "=" + config.depth() + ": creating the shared receive queue of " + config.depth()
							+ " buffers of " + settings.messageSize() + " bytes on device " + queueDevice()
							+ " failed: " + ex.getMessage(),
					"Lower " + property + " to at most the device's max_srq_wr (ibv_devinfo -v), or disable "
							+ "rdma.connections." + name() + ".shared-receive-queue.",
					ex);
		}
	}

	@Override
	@Nullable SharedReceives sharedReceives() {
		return shared;
	}

	/**
	 * The shared receive queue every peer's QP receives from while the server runs, or
	 * null when {@code shared-receive-queue} is not enabled (or the server is stopped).
	 * For inspection ({@link SharedReceiveQueue#queuePairs()},
	 * {@link SharedReceiveQueue#limitEvents()}); posting to it is the server's.
	 */
	public @Nullable SharedReceiveQueue sharedReceiveQueue() {
		SharedReceives s = shared;
		return (s != null) ? s.queueIfOpen() : null;
	}

	private void run() {
		while (running()) {
			if (!transport.awaitRequests(this)) {
				return;
			}
			checkPeers();
		}
	}

	/**
	 * Accepts the peer of {@code request}, or turns it away when {@code max-peers} are.
	 */
	void accept(ServerTransport.Request request) {
		if (!request.admitted() && refused(request)) {
			return;
		}
		int pending = transport.pendingPeers();
		if (peers.size() + pending >= settings.maxPeers()) {
			counters.connectionError("MAX_PEERS");
			counters.reject(RdmaPeerRefusedEvent.Reason.MAX_PEERS);
			String detail = settings.maxPeers() + " peer(s) connected" + ((pending > 0) ? " or being accepted" : "")
					+ " (rdma.connections." + name() + ".max-peers)";
			logRefusal("RDMA connection '" + name() + "' " + request.refusal() + ": " + detail);
			String from = request.from(); // before the turn-away closes the request's id
			request.turnAway();
			publish(new RdmaPeerRefusedEvent(this, from, RdmaPeerRefusedEvent.Reason.MAX_PEERS, detail));
			return;
		}
		PeerConnection peer;
		try {
			peer = request.accept(Deadlines.after(settings.connectTimeout()));
		}
		catch (RuntimeException ex) {
			acceptFailed(request, ex);
			return;
		}
		if (peer != null) {
			established(request, peer);
		}
		// else pending: the transport hands it to established or acceptFailed
	}

	/**
	 * The accept of {@code request} made {@code peer}, connected: listed (unless stopping
	 * began), logged and published.
	 */
	void established(ServerTransport.Request request, PeerConnection peer) {
		try {
			peer.onFailure(transport::peerEnded);
			peer.established();
			if (!addPeer(peer)) {
				// accepted while stopping, after stop() took the peers: never listed
				peer.close(settings.closeTimeout(), ConnectionState.CLOSED);
				return;
			}
			if (counters.established.incrementAndGet() > 1) {
				logger.debug("RDMA connection '" + name() + "' accepted another peer");
			}
			logger.info("RDMA connection '" + name() + "' accepted a peer from " + peer.peerAddress() + exchange.via()
					+ " on " + peer.deviceName());
		}
		catch (RuntimeException ex) {
			acceptFailed(request, ex);
			return;
		}
		publish(new RdmaConnectionEstablishedEvent(this, peer, peer.peerAddress(), peer.deviceName()));
	}

	/**
	 * The accept of {@code request} failed (or its peer never completed the handshake in
	 * {@code connect-timeout}): what it made is released, the failure counted, logged at
	 * a bounded rate and published as refused ({@code ACCEPT_FAILED}).
	 */
	void acceptFailed(ServerTransport.Request request, RuntimeException ex) {
		counters.connectionError(kindOf(ex));
		String from = request.from();
		request.close();
		if (running()) {
			logRefusal(
					"RDMA connection '" + name() + "': accepting a peer from " + from + " failed: " + ex.getMessage());
			publish(new RdmaPeerRefusedEvent(this, from, RdmaPeerRefusedEvent.Reason.ACCEPT_FAILED,
					String.valueOf(ex.getMessage())));
		}
	}

	/**
	 * Refuses {@code request} when admission does not let it through (counted, logged at
	 * a bounded rate, published).
	 * @return whether it was refused
	 */
	boolean refused(ServerTransport.Request request) {
		PeerAdmission.Refusal refusal = admission.check(name(), request.peerAddress(), request.privateData(),
				exchange == Exchange.OUT_OF_BAND);
		if (refusal == null) {
			return false;
		}
		counters.reject(refusal.reason());
		String from = request.from();
		request.refuse(PeerAdmission.rejectData(refusal.toPeer()));
		logRefusal("RDMA connection '" + name() + "' refused a peer from " + from + " (" + refusal.reason() + "): "
				+ refusal.detail());
		publish(new RdmaPeerRefusedEvent(this, from, refusal.reason(), refusal.detail()));
		return true;
	}

	/**
	 * Logs a peer turned away at a bounded rate ({@link RefusalLog}): a flood writes one
	 * line per interval.
	 */
	void logRefusal(String text) {
		String line = refusals.line(text, System.nanoTime());
		if (line != null) {
			logger.warn(line);
		}
	}

	/**
	 * A peer dropped before its accept began (out of band: its record did not arrive in
	 * time, or too many were pending): counted under {@code kind}, logged at a bounded
	 * rate, published as refused ({@code ACCEPT_FAILED}).
	 */
	void dropped(String from, String kind, String detail) {
		counters.connectionError(kind);
		logRefusal("RDMA connection '" + name() + "': accepting a peer from " + from + " failed: " + detail);
		publish(new RdmaPeerRefusedEvent(this, from, RdmaPeerRefusedEvent.Reason.ACCEPT_FAILED, detail));
	}

	/**
	 * Lists {@code peer}, unless stopping began: {@link #stop} takes the peers after it
	 * cleared {@code running} under the same lock, so a peer is either listed (and closed
	 * by stop) or refused here (and closed by the accepting thread).
	 */
	private synchronized boolean addPeer(PeerConnection peer) {
		if (!running()) {
			return false;
		}
		peers.add(peer);
		return true;
	}

	/** Closes each peer whose link ended, or that the application disconnected. */
	private void checkPeers() {
		for (PeerConnection peer : peers) {
			if (peer.disconnectRequested()) {
				peers.remove(peer);
				logger.info("RDMA connection '" + name() + "': disconnecting peer " + transport.describe(peer)
						+ " (disconnect() by the application)");
				closeEnded(peer, "disconnect()", ConnectionState.CLOSED);
				continue;
			}
			String end = peer.failure();
			if (end == null) {
				end = transport.endOf(peer);
			}
			if (end == null) {
				continue;
			}
			counters.connectionError(end);
			peers.remove(peer);
			peer.peerDisconnected();
			logger.info("RDMA connection '" + name() + "': peer " + transport.describe(peer) + " disconnected (" + end
					+ ")");
			transport.acknowledgeEnd(peer);
			closeEnded(peer, end, ConnectionState.DISCONNECTED);
		}
	}

	@Override
	void peerDisconnectRequested(PeerConnection peer) {
		transport.peerEnded(); // the thread closes it at once
	}

	/** Disconnects every current peer; the server keeps listening. */
	@Override
	public void disconnect() {
		for (PeerConnection peer : peers) {
			peer.disconnect();
		}
	}

	@Override
	void stop(long deadline) {
		if (!stopRunning()) {
			return;
		}
		try {
			transport.wakeUp();
			joinThread(deadline);
			List<PeerConnection> open = new ArrayList<>(peers);
			peers.clear();
			for (PeerConnection peer : open) {
				peer.close(remaining(deadline), ConnectionState.CLOSED);
			}
		}
		finally {
			// an accept that ended with this stop, or a peer whose end the thread was
			// handling, when this stop runs on a poller thread (also when the stop
			// failed: no handed-over peer is left unclosed)
			for (PeerConnection peer : takeHandedOver()) {
				peer.finishClose();
			}
		}
		transport.close();
		state = ConnectionState.CLOSED;
		SharedReceives s = shared;
		shared = null;
		if (s != null) {
			s.close(); // after every peer's QP
		}
		closeShared();
	}

	/**
	 * The one peer, as {@link #peers()} lists them: a peer whose disconnect was asked for
	 * no longer counts (it stays in the list until this connection's thread has closed
	 * it).
	 */
	@Override
	PeerConnection sendTarget() {
		PeerConnection only = onlyPeer();
		if (only != null) {
			return only;
		}
		int live = livePeers();
		if (live == 0) {
			throw notEstablished();
		}
		throw new IllegalStateException("connection '" + name() + "' has " + live
				+ " peers: reply through message.connection(), or send to one of peers()");
	}

	/** The one peer whose disconnect was not asked for, or null (none, or several). */
	private @Nullable PeerConnection onlyPeer() {
		List<PeerConnection> now = peers;
		PeerConnection only = null;
		for (int i = 0; i < now.size(); i++) {
			PeerConnection p = now.get(i);
			if (!p.disconnectRequested()) {
				if (only != null) {
					return null;
				}
				only = p;
			}
		}
		return only;
	}

	private int livePeers() {
		List<PeerConnection> now = peers;
		int live = 0;
		for (int i = 0; i < now.size(); i++) {
			live += now.get(i).disconnectRequested() ? 0 : 1;
		}
		return live;
	}

	@Override
	public ConnectionState state() {
		return state;
	}

	@Override
	public boolean isUp() {
		return state == ConnectionState.LISTENING;
	}

	@Override
	public @Nullable String deviceName() {
		return transport.deviceName(this);
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		PeerConnection only = onlyPeer();
		return (only != null) ? only.peerAddress() : null;
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		return settings.address();
	}

	@Override
	public List<RdmaConnection> peers() {
		List<RdmaConnection> listed = new ArrayList<>(peers.size());
		for (PeerConnection peer : peers) {
			if (!peer.disconnectRequested()) {
				listed.add(peer);
			}
		}
		return List.copyOf(listed);
	}

	@Override
	String describeAddress() {
		return "listen " + settings.address() + exchange.qualifier();
	}

	@Override
	public String toString() {
		return "ServerConnection[" + name() + " on " + settings.address() + exchange.qualifier() + ", " + state + ", "
				+ peers.size() + " peer(s)]";
	}

}
