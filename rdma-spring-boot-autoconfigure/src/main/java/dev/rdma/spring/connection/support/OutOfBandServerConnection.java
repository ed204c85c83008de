package dev.rdma.spring.connection.support;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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

/**
 * A {@code listen} connection with {@code exchange: out-of-band}: the behaviour of a
 * {@link ServerConnection} without rdma_cm. It binds a TCP listening socket on
 * {@code listen} when the application starts (a bad or busy address fails startup), then
 * a thread of its own ({@code rdma-accept-<name>}) accepts up to {@code max-peers} peers
 * at once (the connection of one more is closed at once: its client retries later) and
 * notices each peer's end, for as long as the application runs.
 *
 * <p>
 * One accept, within {@code connect-timeout}: a new {@link PeerConnection} on the device
 * of the connection's queues, its QP moved to INIT on the configured port with every
 * receive buffer posted, then the exchange of {@link OutOfBandLink} (read the client's
 * record, RTR and RTS, answer, wait for the client's {@code "done"}).
 *
 * <p>
 * <b>A peer's end.</b> Each peer's TCP connection stays open as its liveness channel; the
 * thread checks every peer at least every 100 ms (it waits in a selector that wakes up
 * for a new client or for stopping). End of stream or a reset: the peer is DISCONNECTED
 * and closed (QP to error, flushed work requests drained through the pollers, QP, buffers
 * and socket destroyed). Stopping closes every peer in order (FIN, up to half the
 * shutdown timeout for the peer's, QP to error, drain, destroy), then the listening
 * socket.
 *
 * <p>
 * As an {@link RdmaConnection}, the server sends to its one peer; with none, or several,
 * reply through {@code message.connection()} or pick one of {@link #peers()}.
 */
public final class OutOfBandServerConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(OutOfBandServerConnection.class);

	private static final long POLL_MILLIS = 100;

	private final List<PeerConnection> peers = new CopyOnWriteArrayList<>();

	private final Map<PeerConnection, OutOfBandLink> links = new ConcurrentHashMap<>();

	private @Nullable ServerSocketChannel server;

	private @Nullable Selector selector;

	/** The link of the accept in progress (closed by {@link #stop}). */
	private volatile @Nullable OutOfBandLink accepting;

	private volatile boolean running;

	private @Nullable Thread thread;

	public OutOfBandServerConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		super(settings, sendCq, receiveCq, routers, listener);
		if (settings.outOfBand() == null) {
			throw new IllegalArgumentException("connection '" + settings.name() + "' has no out-of-band options");
		}
	}

	@Override
	synchronized void start() {
		if (running) {
			return;
		}
		openProtectionDomain();
		String property = "rdma.connections." + name() + ".listen";
		ServerSocketChannel ssc = null;
		Selector sel = null;
		try {
			ssc = ServerSocketChannel.open();
			ssc.setOption(StandardSocketOptions.SO_REUSEADDR, true);
			ssc.bind(settings.address(), Math.max(8, settings.maxPeers()));
			ssc.configureBlocking(false);
			sel = Selector.open();
			ssc.register(sel, SelectionKey.OP_ACCEPT);
		}
		catch (IOException | RuntimeException ex) {
			closeQuietly(sel);
			closeQuietly(ssc);
			closeShared();
			throw new RdmaConfigurationException(property,
					property + "=" + settings.address() + ": cannot listen for out-of-band exchanges (TCP): "
							+ ex.getMessage(),
					"Set " + property + " to host:port of an address of this host, with a free TCP port.", ex);
		}
		server = ssc;
		selector = sel;
		running = true;
		state = ConnectionState.LISTENING;
		logger.info("RDMA connection '" + name() + "' listening for out-of-band exchanges on " + settings.address()
				+ " (up to " + settings.maxPeers() + " peer(s), device " + queueDevice() + ")");
		Thread t = new Thread(this::run, "rdma-accept-" + name());
		t.setDaemon(true);
		thread = t;
		t.start();
	}

	private void run() {
		ServerSocketChannel ssc = server;
		Selector sel = selector;
		if (ssc == null || sel == null) {
			return;
		}
		while (running) {
			try {
				sel.select(POLL_MILLIS);
				sel.selectedKeys().clear();
				SocketChannel client;
				while (running && (client = ssc.accept()) != null) {
					accept(client);
				}
			}
			catch (ClosedSelectorException ex) {
				return;
			}
			catch (IOException | RuntimeException ex) {
				if (!running) {
					return;
				}
				counters.connectionError(ex instanceof RuntimeException r ? kindOf(r) : "IO_ERROR");
				logger.warn("RDMA connection '" + name() + "': accepting an exchange connection failed", ex);
			}
			checkPeers();
		}
	}

	private void accept(SocketChannel client) {
		if (peers.size() >= settings.maxPeers()) {
			counters.connectionError("MAX_PEERS");
			logger.warn("RDMA connection '" + name() + "' turns a peer away: " + settings.maxPeers()
					+ " peer(s) connected (rdma.connections." + name() + ".max-peers)");
			closeQuietly(client);
			return;
		}
		OutOfBandLink link = null;
		PeerConnection peer = null;
		try {
			long deadline = System.nanoTime() + settings.connectTimeout().toNanos();
			link = OutOfBandLink.accepted(client);
			accepting = link;
			if (!running) {
				throw new AttemptFailedException("STOPPED", "stopping");
			}
			peer = newPeer(link);
			QueuePair qp = peer.queuePair();
			ConnectionSettings.OutOfBandOptions oob = settings.outOfBand();
			qp.moveToInit(oob == null ? 1 : oob.port());
			peer.postReceives();
			link.exchangeAsServer(qp, OutOfBandLink.options(settings, settings.connectTimeout()), deadline);
			peer.established();
			if (counters.established.incrementAndGet() > 1) {
				logger.debug("RDMA connection '" + name() + "' accepted another peer");
			}
			links.put(peer, link);
			peers.add(peer);
			logger.info("RDMA connection '" + name() + "' accepted a peer from " + peer.peerAddress()
					+ " out of band on " + peer.deviceName());
		}
		catch (RuntimeException ex) {
			counters.connectionError(kindOf(ex));
			if (running) {
				logger.warn("RDMA connection '" + name() + "': accepting a peer from "
						+ (link == null ? "?" : link.peerAddress()) + " failed: " + ex.getMessage());
			}
			if (peer != null) {
				peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
			}
			else if (link != null) {
				link.close();
			}
			else {
				closeQuietly(client);
			}
		}
		finally {
			accepting = null;
		}
	}

	/** Closes each peer whose exchange connection ended. */
	private void checkPeers() {
		for (PeerConnection peer : peers) {
			OutOfBandLink link = links.get(peer);
			if (link == null || link.alive()) {
				continue;
			}
			counters.connectionError("DISCONNECTED");
			peers.remove(peer);
			links.remove(peer);
			peer.peerDisconnected();
			logger.info("RDMA connection '" + name() + "': peer " + link + " disconnected");
			peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
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
		Selector sel = selector;
		if (sel != null) {
			sel.wakeup();
		}
		OutOfBandLink a = accepting;
		if (a != null) {
			a.close();
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
		links.clear();
		for (PeerConnection peer : open) {
			peer.close(Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime())), ConnectionState.CLOSED);
		}
		closeQuietly(sel);
		closeQuietly(server);
		selector = null;
		server = null;
		state = ConnectionState.CLOSED;
		closeShared();
	}

	private static void closeQuietly(@Nullable AutoCloseable closeable) {
		if (closeable != null) {
			try {
				closeable.close();
			}
			catch (Exception ignored) {
				// a socket or selector: nothing to flush
			}
		}
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
		return running ? queueDevice() : null;
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
		return "listen " + settings.address() + " (out of band)";
	}

	@Override
	public String toString() {
		return "OutOfBandServerConnection[" + name() + " on " + settings.address() + ", " + state + ", " + peers.size()
				+ " peer(s)]";
	}

}
