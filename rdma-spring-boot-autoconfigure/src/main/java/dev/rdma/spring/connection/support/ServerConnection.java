package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.RdmaException;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

/**
 * A {@code listen} connection: binds and listens when the application starts (a bad
 * address fails startup), then a thread of its own ({@code rdma-accept-<name>}) accepts
 * up to {@code max-peers} peers at once (more are rejected) and notices each peer's
 * disconnect, for as long as the application runs.
 *
 * <p>
 * One accept: a new {@link PeerConnection} for the request's id (QP on the application's
 * queues) moved to INIT with every receive buffer posted, then RTR and RTS with the CM's
 * attributes, {@code rdma_accept} with the configured parameters, ESTABLISHED within
 * {@code connect-timeout}.
 *
 * <p>
 * As an {@link RdmaConnection}, the server sends to its one peer; with none, or several,
 * reply through {@code message.connection()} or pick one of {@link #peers()}.
 */
public final class ServerConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(ServerConnection.class);

	private static final byte[] BUSY = "rdma-spring-boot: max-peers reached".getBytes(StandardCharsets.US_ASCII);

	private final List<PeerConnection> peers = new CopyOnWriteArrayList<>();

	private @Nullable ConnectionId listener;

	private volatile boolean running;

	private @Nullable Thread thread;

	public ServerConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		super(settings, sendCq, receiveCq, routers, listener);
	}

	@Override
	synchronized void start() {
		if (running) {
			return;
		}
		open();
		EventChannel ch = channel;
		String property = "rdma.connections." + name() + ".listen";
		try {
			ConnectionId id = ch.createId();
			listener = id;
			id.bind(settings.address());
			id.listen(Math.max(8, settings.maxPeers()));
		}
		catch (RuntimeException ex) {
			closeShared();
			listener = null;
			throw new RdmaConfigurationException(property,
					property + "=" + settings.address() + ": rdma_bind_addr/rdma_listen failed"
							+ (ex instanceof RdmaException ? "" : ": " + ex.getMessage()),
					"Set " + property + " to host:port of an address of this host's RDMA netdev, with a free port.",
					ex);
		}
		running = true;
		state = ConnectionState.LISTENING;
		logger.info("RDMA connection '" + name() + "' listening on " + settings.address() + " (up to "
				+ settings.maxPeers() + " peer(s))");
		Thread t = new Thread(this::run, "rdma-accept-" + name());
		t.setDaemon(true);
		thread = t;
		t.start();
	}

	private void run() {
		ConnectionId id = listener;
		if (id == null) {
			return;
		}
		while (running) {
			CmEvent e;
			try {
				e = id.getEvent(Duration.ofMillis(100));
			}
			catch (IllegalStateException closed) {
				return;
			}
			catch (RuntimeException ex) {
				counters.connectionError(kindOf(ex));
				logger.warn("RDMA connection '" + name() + "': reading rdma_cm events failed", ex);
				continue;
			}
			if (e != null) {
				if (e.type() == CmEventType.CONNECT_REQUEST) {
					accept(e.id());
				}
				else if (e.type() == CmEventType.DEVICE_REMOVAL) {
					counters.connectionError(e.type().name());
					logger.error("RDMA connection '" + name() + "': the device of " + settings.address()
							+ " was removed; no more peers are accepted");
				}
			}
			checkPeers();
		}
	}

	private void accept(ConnectionId request) {
		if (peers.size() >= settings.maxPeers()) {
			counters.connectionError("MAX_PEERS");
			logger.warn("RDMA connection '" + name() + "' rejects a peer from " + request.peerAddress() + ": "
					+ settings.maxPeers() + " peer(s) connected (rdma.connections." + name() + ".max-peers)");
			try {
				request.reject(BUSY);
			}
			catch (RuntimeException ignored) {
				// the peer went away meanwhile
			}
			request.close();
			return;
		}
		PeerConnection peer = null;
		try {
			long deadline = System.nanoTime() + settings.connectTimeout().toNanos();
			peer = newPeer(request);
			QueuePair qp = peer.queuePair();
			request.moveQueuePair(qp, QueuePair.State.INIT);
			peer.postReceives();
			request.moveQueuePair(qp, QueuePair.State.RTR);
			request.moveQueuePair(qp, QueuePair.State.RTS);
			CmEvent connectRequest = request.request();
			peer.remoteRegion(connectRequest == null ? null : RemoteRegion.parse(connectRequest.privateData()));
			request.accept(qp, settings.cm(), peer.privateData());
			expect(request, "rdma_accept from " + request.peerAddress(), deadline, CmEventType.ESTABLISHED);
			peer.established();
			if (counters.established.incrementAndGet() > 1) {
				logger.debug("RDMA connection '" + name() + "' accepted another peer");
			}
			peers.add(peer);
			logger.info("RDMA connection '" + name() + "' accepted a peer from " + peer.peerAddress() + " on "
					+ peer.deviceName());
		}
		catch (RuntimeException ex) {
			counters.connectionError(kindOf(ex));
			logger.warn("RDMA connection '" + name() + "': accepting a peer from " + request.peerAddress() + " failed: "
					+ ex.getMessage());
			if (peer != null) {
				peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
			}
			else {
				try {
					request.reject(new byte[0]);
				}
				catch (RuntimeException ignored) {
					// nothing to answer any more
				}
				request.close();
			}
		}
	}

	/**
	 * Closes each peer whose id saw DISCONNECTED (the events were read while waiting).
	 */
	private void checkPeers() {
		for (PeerConnection peer : peers) {
			CmEvent e;
			try {
				e = peer.connectionId().getEvent(Duration.ZERO);
			}
			catch (IllegalStateException closed) {
				e = null;
			}
			if (e == null) {
				continue;
			}
			if (e.type() == CmEventType.DISCONNECTED || e.type() == CmEventType.DEVICE_REMOVAL) {
				counters.connectionError(e.type().name());
				peers.remove(peer);
				peer.peerDisconnected();
				logger.info("RDMA connection '" + name() + "': peer " + peer.peerAddress() + " disconnected");
				try {
					peer.queuePair().moveToError();
				}
				catch (RuntimeException ignored) {
					// in error already
				}
				try {
					// the DREP the peer's rdma_disconnect waits for
					peer.connectionId().disconnect();
				}
				catch (RuntimeException ignored) {
					// disconnected already
				}
				peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
			}
		}
	}

	@Override
	void stop(long deadline) {
		Thread t;
		synchronized (this) {
			if (!running) {
				return;
			}
			running = false;
			t = thread;
		}
		ConnectionId id = listener;
		if (id != null) {
			id.wakeUp();
		}
		if (t != null) {
			try {
				t.join(Math.max(1, (deadline - System.nanoTime()) / 2_000_000));
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}
		List<PeerConnection> open = new ArrayList<>(peers);
		peers.clear();
		for (PeerConnection peer : open) {
			peer.close(Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime())), ConnectionState.CLOSED);
		}
		if (id != null) {
			id.close();
		}
		listener = null;
		state = ConnectionState.CLOSED;
		closeShared();
	}

	@Override
	PeerConnection sendTarget() {
		List<PeerConnection> now = peers;
		if (now.isEmpty()) {
			throw notEstablished();
		}
		if (now.size() > 1) {
			throw new IllegalStateException("connection '" + name() + "' has " + now.size()
					+ " peers: reply through message.connection(), or send to one of peers()");
		}
		return now.get(0);
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
		ConnectionId id = listener;
		return id == null || id.isClosed() ? null : id.deviceName();
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		List<PeerConnection> now = peers;
		return now.size() == 1 ? now.get(0).peerAddress() : null;
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		return settings.address();
	}

	@Override
	public List<RdmaConnection> peers() {
		return List.copyOf(peers);
	}

	@Override
	String describeAddress() {
		return "listen " + settings.address();
	}

	@Override
	public String toString() {
		return "ServerConnection[" + name() + " on " + settings.address() + ", " + state + ", " + peers.size()
				+ " peer(s)]";
	}

}
