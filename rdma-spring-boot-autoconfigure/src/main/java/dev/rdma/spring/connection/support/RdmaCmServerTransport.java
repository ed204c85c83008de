package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.RdmaException;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

import static dev.rdma.spring.connection.support.ConfiguredConnection.kindOf;

/**
 * The rdma_cm {@link ServerTransport}: a listening id bound to {@code listen} (a bad
 * address fails startup), waited on for CONNECT_REQUEST. Reading the channel delivers the
 * peers' events to their ids' queues, which {@link #endOf} reads: DISCONNECTED or
 * DEVICE_REMOVAL ends a peer, answered with the QP to error and the DREP its
 * {@code rdma_disconnect} waits for.
 *
 * <p>
 * One accept: a new {@link PeerConnection} for the request's id (QP on the application's
 * queues) moved to INIT with every receive buffer posted, then RTR and RTS with the CM's
 * attributes, {@code rdma_accept} with the configured parameters. It does not wait for
 * ESTABLISHED: the peer is then pending, and the thread goes on reading requests. Each
 * wait of {@link #awaitRequests} looks at every pending peer's id: ESTABLISHED hands the
 * peer to {@link ServerConnection#established}; an error event (REJECTED,
 * DISCONNECTED...), or no ESTABLISHED within {@code connect-timeout} (a half-open peer:
 * connect request, never RTU), drops it with everything made for it (QP, buffers,
 * regions, the id, whose destruction rejects the peer) through
 * {@link ServerConnection#acceptFailed}. Pending peers count against {@code max-peers}
 * ({@link #pendingPeers}): a flood of half-open peers holds at most that many accepts,
 * each for at most {@code connect-timeout}, and delays no other peer's accept.
 */
final class RdmaCmServerTransport implements ServerTransport {

	private static final Log logger = LogFactory.getLog(RdmaCmServerTransport.class);

	private static final byte[] BUSY = "rdma-spring-boot: max-peers reached".getBytes(StandardCharsets.US_ASCII);

	private volatile @Nullable ConnectionId listener;

	/** How long a wait for requests lasts while peers are pending (their ESTABLISHED). */
	private static final Duration PENDING_POLL = Duration.ofMillis(20);

	/** How long a wait for requests lasts otherwise. */
	private static final Duration IDLE_POLL = Duration.ofMillis(100);

	/**
	 * Accepted peers waiting for ESTABLISHED, in accept order (the accepting thread adds
	 * and takes them; {@link #close} takes those left). Guarded by itself.
	 */
	private final PendingAccepts<CmRequest> pending = new PendingAccepts<>();

	@Override
	public void listen(ServerConnection server) {
		server.open();
		EventChannel ch = server.channel;
		ConnectionSettings settings = server.settings;
		String property = "rdma.connections." + server.name() + ".listen";
		String value = hostAndPort(settings.address());
		try {
			ConnectionId id = ch.createId();
			listener = id;
			id.bind(settings.address());
			// bound to one address, the id knows its device: one that is not the queues'
			// would refuse every peer (DEVICE_MISMATCH), so it fails startup here
			String device = id.deviceName();
			String expected = server.queueDevice();
			if (device != null && !device.equals(expected)) {
				throw new RdmaConfigurationException(property,
						property + "=" + value + " is an address of RDMA device " + device + ", but queues '"
								+ settings.sendQueue() + "' and '" + settings.receiveQueue() + "' are on " + expected
								+ ": no peer could use them",
						"Set " + property + " to an address of " + expected
								+ "'s netdev (or 0.0.0.0), or configure the queues on " + device + ".");
			}
			id.listen(Math.max(8, settings.maxPeers()));
		}
		catch (RdmaConfigurationException ex) {
			server.closeShared();
			listener = null;
			throw ex;
		}
		catch (RuntimeException ex) {
			server.closeShared();
			listener = null;
			throw new RdmaConfigurationException(property,
					property + "=" + value + ": rdma_bind_addr/rdma_listen failed"
							+ (ex instanceof RdmaException ? "" : ": " + ex.getMessage()),
					"Set " + property + " to host:port of an address of this host's RDMA netdev, with a free port.",
					ex);
		}
	}

	/** {@code host:port} as the property is written ({@code [v6]:port} for IPv6). */
	private static String hostAndPort(InetSocketAddress address) {
		String host = address.getHostString();
		return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + address.getPort();
	}

	@Override
	public String describeListening(ServerConnection server) {
		return "on " + server.settings.address() + " (up to " + server.settings.maxPeers() + " peer(s))";
	}

	/** The most listener events one turn of the accept loop handles. */
	private static final int DRAIN = 256;

	@Override
	public boolean awaitRequests(ServerConnection server) {
		ConnectionId id = listener;
		if (id == null) {
			return false;
		}
		CmEvent e;
		try {
			e = id.getEvent(pendingPeers() > 0 ? PENDING_POLL : IDLE_POLL);
		}
		catch (IllegalStateException closed) {
			return false;
		}
		catch (RuntimeException ex) {
			server.counters.connectionError(kindOf(ex));
			logger.warn("RDMA connection '" + server.name() + "': reading rdma_cm events failed", ex);
			return true;
		}
		// then what is already there, up to DRAIN in all: the peers' and the pending
		// peers' event reads of this loop queue the connect requests they find on the
		// shared channel, and a flood that queued more than one per turn would otherwise
		// grow without bound (each read request frees its slot of the kernel's backlog)
		for (int n = 0; e != null; n++) {
			if (e.type() == CmEventType.CONNECT_REQUEST) {
				server.accept(new CmRequest(server, e.id()));
			}
			else if (e.type() == CmEventType.DEVICE_REMOVAL) {
				server.counters.connectionError(e.type().name());
				logger.error("RDMA connection '" + server.name() + "': the device of " + server.settings.address()
						+ " was removed; no more peers are accepted");
			}
			if (n + 1 >= DRAIN || !server.running()) {
				break;
			}
			try {
				e = id.getEvent(Duration.ZERO);
			}
			catch (RuntimeException ex) {
				break; // reported by the next turn's wait
			}
		}
		pending.check(server, CmRequest::established);
		return true;
	}

	@Override
	public int pendingPeers() {
		return pending.size();
	}

	@Override
	public void wakeUp() {
		peerEnded(); // ends the listener's wait (an accept never waits for its peer)
	}

	@Override
	public void peerEnded() {
		ConnectionId id = listener;
		if (id != null) {
			id.wakeUp();
		}
	}

	@Override
	public @Nullable String endOf(PeerConnection peer) {
		CmEvent e;
		try {
			e = peer.connectionId().getEvent(Duration.ZERO);
		}
		catch (IllegalStateException closed) {
			return null;
		}
		if (e != null && (e.type() == CmEventType.DISCONNECTED || e.type() == CmEventType.DEVICE_REMOVAL)) {
			return e.type().name();
		}
		return null;
	}

	@Override
	public void acknowledgeEnd(PeerConnection peer) {
		ConfiguredConnection.answerDisconnect(peer);
	}

	@Override
	public String describe(PeerConnection peer) {
		return String.valueOf(peer.peerAddress());
	}

	@Override
	public void close() {
		// the peers still pending: dropped with everything made for them
		for (CmRequest r : pending.close()) {
			r.close();
		}
		ConnectionId id = listener;
		if (id != null) {
			id.close();
		}
		listener = null;
	}

	@Override
	public @Nullable String deviceName(ServerConnection server) {
		ConnectionId id = listener;
		return (id == null || id.isClosed()) ? null : id.deviceName();
	}

	/** A CONNECT_REQUEST's id. */
	private final class CmRequest extends PendingPeer implements Request {

		private final ConnectionId request;

		/** When a pending accept gives up waiting for ESTABLISHED. */
		private long deadline;

		CmRequest(ServerConnection server, ConnectionId request) {
			super(server);
			this.request = request;
		}

		@Override
		public String from() {
			return String.valueOf(request.peerAddress());
		}

		@Override
		public String refusal() {
			return "rejects a peer from " + request.peerAddress();
		}

		@Override
		public void turnAway() {
			reject(BUSY);
		}

		@Override
		public @Nullable InetSocketAddress peerAddress() {
			return request.peerAddress();
		}

		@Override
		public byte[] privateData() {
			CmEvent connectRequest = request.request();
			return (connectRequest != null) ? connectRequest.privateData() : new byte[0];
		}

		@Override
		public void refuse(byte[] rejectData) {
			reject(rejectData);
		}

		/**
		 * Everything up to {@code rdma_accept}, without waiting for ESTABLISHED: the peer
		 * is pending from then on ({@link PendingAccepts#check}), and null is returned.
		 */
		@Override
		public @Nullable PeerConnection accept(long deadline) {
			if (!connection.running()) {
				throw new AttemptFailedException("STOPPED", "rdma_accept from " + request.peerAddress() + ": stopping");
			}
			this.deadline = deadline;
			PeerConnection peer = newPeer(request);
			QueuePair qp = peer.queuePair();
			request.moveQueuePair(qp, QueuePair.State.INIT);
			peer.postReceives();
			request.moveQueuePair(qp, QueuePair.State.RTR);
			request.moveQueuePair(qp, QueuePair.State.RTS);
			CmEvent connectRequest = request.request();
			peer.remoteRegion((connectRequest != null) ? RemoteRegion.parse(connectRequest.privateData()) : null);
			// rdma_accept under the pending peers' lock: a close (stopping) that took
			// them refuses this one before, and the caller drops it
			if (!pending.add(this, () -> request.accept(qp, settings.cm(), peer.privateData()))) {
				throw new AttemptFailedException("STOPPED", "rdma_accept from " + request.peerAddress() + ": stopping");
			}
			return null;
		}

		/**
		 * Whether ESTABLISHED arrived on the id (events that do not matter are skipped).
		 * @throws AttemptFailedException on an error event, a closed id, or when
		 * {@code connect-timeout} passed without it
		 */
		boolean established() {
			while (true) {
				CmEvent e;
				try {
					e = request.getEvent(Duration.ZERO);
				}
				catch (IllegalStateException ex) {
					throw new AttemptFailedException("CLOSED",
							"rdma_accept from " + request.peerAddress() + ": " + ex.getMessage(), ex);
				}
				if (e == null) {
					if (System.nanoTime() - deadline >= 0) {
						throw new AttemptFailedException("TIMEOUT",
								"rdma_accept from " + request.peerAddress() + ": no " + List.of(CmEventType.ESTABLISHED)
										+ " within rdma.connections." + settings.name() + ".connect-timeout ("
										+ settings.connectTimeout() + ")");
					}
					return false;
				}
				if (e.type() == CmEventType.ESTABLISHED) {
					return true;
				}
				if (e.type() != CmEventType.ADDR_CHANGE && e.type() != CmEventType.TIMEWAIT_EXIT) {
					throw new AttemptFailedException(e.type().name(),
							"rdma_accept from " + request.peerAddress() + ": " + e.text() + ", " + e.statusText());
				}
			}
		}

		@Override
		void release() {
			reject(new byte[0]);
		}

		private void reject(byte[] reason) {
			try {
				request.reject(reason);
			}
			catch (RuntimeException ignored) {
				// the peer went away meanwhile
			}
			request.close();
		}

	}

}
