package dev.rdma.spring.connection.support;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.exchange.PingpongWire;

import static dev.rdma.spring.connection.support.ConfiguredConnection.kindOf;

/**
 * The {@link ServerTransport} of {@code exchange: out-of-band}: no rdma_cm. A TCP
 * listening socket bound on {@code listen} when the application starts (a bad or busy
 * address fails startup), waited on in a selector that wakes up for a new client, for the
 * bytes of a client's record, or for stopping. A new connection whose address admission
 * refuses is closed at once, before any record is sent; the others wait, non-blocking and
 * at most {@code max(16, 4 x max-peers)} at once (more are closed at once), for the
 * client's 52-byte record until {@code connect-timeout}: a client that connects and never
 * writes, or trickles, is dropped then without holding up anyone else's accept. The
 * connection of one more than {@code max-peers} is closed at once (its client retries
 * later).
 *
 * <p>
 * One accept, within {@code connect-timeout} ({@link OutOfBandRequest}): a new
 * {@link PeerConnection} on the device of the connection's queues, its QP moved to INIT
 * on the configured port with every receive buffer posted, then the exchange of
 * {@link OutOfBandLink} (the client's record, RTR and RTS, the answer). The client's
 * {@code "done"} is then read without blocking at each turn of the loop, the peer counted
 * against {@code max-peers} meanwhile ({@link #pendingPeers}): a client that answers
 * nothing holds up no other peer's accept, and is dropped at its {@code connect-timeout}.
 *
 * <p>
 * <b>A peer's end.</b> With {@code out-of-band.liveness: tcp} (the default) each peer's
 * TCP connection stays open as its liveness channel: end of stream or a reset ends the
 * peer. With {@code none} the server closes it once it read the client's {@code "done"},
 * as {@code ibv_rc_pingpong}'s server does, and only a failed completion of the peer's QP
 * ends the peer (a send to a client whose QP is gone: RETRY_EXC_ERR); the server then
 * drops it and accepts the next. Stopping closes every peer in order (FIN, none without
 * the socket, up to half the shutdown timeout for the peer's, QP to error, drain,
 * destroy), then the listening socket. The log names a peer by the address of its
 * exchange connection, {@code ip:port}.
 */
final class OutOfBandServerTransport implements ServerTransport {

	private static final Log logger = LogFactory.getLog(OutOfBandServerTransport.class);

	private static final long POLL_MILLIS = 100;

	/** How long a wait lasts while answered peers wait for their "done". */
	private static final long ANSWERED_POLL_MILLIS = 20;

	/** Accepted peers whose answer went out and whose {@code "done"} has not arrived. */
	private final PendingAccepts<OutOfBandRequest> answered = new PendingAccepts<>();

	// failed accepts (the accept thread's)
	private long acceptFailures;

	private long acceptFailuresLogged;

	private long lastAcceptFailureLog;

	private final ConnectionSettings.OutOfBandOptions options;

	private volatile @Nullable ServerSocketChannel socket;

	private volatile @Nullable Selector selector;

	/**
	 * Exchange connections whose record has not arrived yet (only the accepting thread
	 * touches them).
	 */
	private final List<Pending> pending = new ArrayList<>();

	/** The link of the accept in progress (closed by {@link #wakeUp}). */
	private volatile @Nullable OutOfBandLink accepting;

	OutOfBandServerTransport(ConnectionSettings.OutOfBandOptions options) {
		this.options = options;
	}

	@Override
	public void listen(ServerConnection server) {
		server.openProtectionDomain();
		ConnectionSettings settings = server.settings;
		String property = "rdma.connections." + server.name() + ".listen";
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
			server.closeShared();
			throw new RdmaConfigurationException(property,
					property + "=" + settings.address() + ": cannot listen for out-of-band exchanges (TCP): "
							+ ex.getMessage(),
					"Set " + property + " to host:port of an address of this host, with a free TCP port.", ex);
		}
		socket = ssc;
		selector = sel;
	}

	@Override
	public String describeListening(ServerConnection server) {
		return "for out-of-band exchanges on " + server.settings.address() + " (up to " + server.settings.maxPeers()
				+ " peer(s), device " + server.queueDevice() + ")";
	}

	@Override
	public boolean awaitRequests(ServerConnection server) {
		ServerSocketChannel ssc = socket;
		Selector sel = selector;
		if (ssc == null || sel == null) {
			return false;
		}
		try {
			sel.select(pendingPeers() > 0 ? ANSWERED_POLL_MILLIS : POLL_MILLIS);
			List<Pending> complete = new ArrayList<>();
			for (SelectionKey key : sel.selectedKeys()) {
				if (key.isValid() && key.isReadable() && key.attachment() instanceof Pending p && p.read(server)) {
					complete.add(p);
				}
			}
			sel.selectedKeys().clear();
			acceptArrivals(server, ssc, sel);
			expire(server, sel);
			if (!complete.isEmpty()) {
				// deregistered before blocking mode: the cancelled keys go at the next
				// select
				sel.selectNow();
				sel.selectedKeys().clear();
				for (Pending p : complete) {
					server.accept(new OutOfBandRequest(this, options, server, p.channel, p.record.array()));
				}
			}
			// a client that answers nothing holds up no other peer's accept
			answered.check(server, OutOfBandRequest::doneArrived);
		}
		catch (ClosedSelectorException ex) {
			return false;
		}
		catch (IOException | RuntimeException ex) {
			if (!server.running()) {
				return false;
			}
			server.counters.connectionError((ex instanceof RuntimeException r) ? kindOf(r) : "IO_ERROR");
			logger.warn("RDMA connection '" + server.name() + "': accepting an exchange connection failed", ex);
		}
		return true;
	}

	/**
	 * Accepts the exchange connections waiting. A failed accept (EMFILE or ENFILE: the
	 * process or the host out of descriptors, e.g. under a flood) is counted, logged at
	 * most once per {@link RefusalLog#INTERVAL}, and followed by a pause of one poll: the
	 * listening socket stays ready, and the loop would otherwise spin on it. The records
	 * already complete still go to their accept.
	 */
	private void acceptArrivals(ServerConnection server, ServerSocketChannel ssc, Selector sel) {
		try {
			SocketChannel client;
			while (server.running() && (client = ssc.accept()) != null) {
				arrived(server, sel, client);
			}
		}
		catch (IOException ex) {
			if (!server.running()) {
				return;
			}
			server.counters.connectionError("IO_ERROR");
			long now = System.nanoTime();
			if (acceptFailuresLogged == 0 || now - lastAcceptFailureLog >= RefusalLog.INTERVAL.toNanos()) {
				logger.warn("RDMA connection '" + server.name() + "': accepting an exchange connection failed ("
						+ (acceptFailures + 1) + " time(s) since the last such line; at most one line per "
						+ RefusalLog.INTERVAL.toSeconds() + "s): " + ex);
				lastAcceptFailureLog = now;
				acceptFailures = 0;
				acceptFailuresLogged++;
			}
			else {
				acceptFailures++;
			}
			try {
				Thread.sleep(POLL_MILLIS);
			}
			catch (InterruptedException interrupted) {
				Thread.currentThread().interrupt();
			}
		}
	}

	/**
	 * A new exchange connection: refused at once when admission does not let its address
	 * through or {@link #maxPending} are waiting for their records; else waited on (non
	 * blocking) for its record, until {@code connect-timeout}.
	 */
	private void arrived(ServerConnection server, Selector sel, SocketChannel client) throws IOException {
		OutOfBandRequest early = new OutOfBandRequest(this, options, server, client, null);
		if (server.refused(early)) {
			return;
		}
		String from = early.from();
		if (pending.size() >= maxPending(server)) {
			closeQuietly(client);
			server.dropped(from, "PENDING_FULL", maxPending(server) + " exchange connections are waiting for their "
					+ "endpoint records (4 x max-peers, at least 16): closed at once");
			return;
		}
		client.configureBlocking(false);
		Pending p = new Pending(client, from, System.nanoTime() + Deadlines.nanos(server.settings.connectTimeout()));
		p.key = client.register(sel, SelectionKey.OP_READ, p);
		pending.add(p);
	}

	/** Drops each pending connection whose record did not arrive by its deadline. */
	private void expire(ServerConnection server, Selector sel) {
		long now = System.nanoTime();
		for (Pending p : new ArrayList<>(pending)) {
			if (now - p.deadline >= 0) {
				p.drop();
				server.dropped(p.from, "TIMEOUT",
						p.from + " did not send its " + PingpongWire.MESSAGE_BYTES + "-byte endpoint record within "
								+ server.settings.connectTimeout().toMillis() + " ms (connect-timeout; got "
								+ p.record.position() + " bytes)");
			}
		}
	}

	@Override
	public int pendingPeers() {
		return answered.size();
	}

	/** How many exchange connections may wait for their records at once. */
	private static int maxPending(ServerConnection server) {
		return Math.max(16, 4 * server.settings.maxPeers());
	}

	/**
	 * An exchange connection waiting for the client's record (non-blocking, in the
	 * selector): at most {@value PingpongWire#MESSAGE_BYTES} bytes are read, until its
	 * deadline.
	 */
	private final class Pending {

		final SocketChannel channel;

		final String from;

		final long deadline;

		final ByteBuffer record = ByteBuffer.allocate(PingpongWire.MESSAGE_BYTES);

		@Nullable SelectionKey key;

		Pending(SocketChannel channel, String from, long deadline) {
			this.channel = channel;
			this.from = from;
			this.deadline = deadline;
		}

		/**
		 * Reads what arrived: true once the record is complete (deregistered, to be
		 * accepted); a closed or failed connection is dropped.
		 */
		boolean read(ServerConnection server) {
			int n;
			try {
				n = channel.read(record);
			}
			catch (IOException ex) {
				n = -1;
			}
			if (n < 0) {
				drop();
				server.dropped(from, "EXCHANGE", from + " closed the exchange connection after " + record.position()
						+ " of the " + PingpongWire.MESSAGE_BYTES + " bytes of its endpoint record");
				return false;
			}
			if (record.hasRemaining()) {
				return false;
			}
			pending.remove(this);
			SelectionKey k = key;
			if (k != null) {
				k.cancel();
			}
			return true;
		}

		void drop() {
			pending.remove(this);
			SelectionKey k = key;
			if (k != null) {
				k.cancel();
			}
			closeQuietly(channel);
		}

	}

	@Override
	public void wakeUp() {
		Selector sel = selector;
		if (sel != null) {
			sel.wakeup();
		}
		OutOfBandLink a = accepting;
		if (a != null) {
			a.close();
		}
	}

	@Override
	public void peerEnded() {
		Selector sel = selector;
		if (sel != null) {
			sel.wakeup();
		}
	}

	@Override
	public @Nullable String endOf(PeerConnection peer) {
		return (peer.link() instanceof OutOfBandLink link && !link.alive()) ? "DISCONNECTED" : null;
	}

	@Override
	public void acknowledgeEnd(PeerConnection peer) {
		// the end of the TCP connection needs no answer
	}

	@Override
	public String describe(PeerConnection peer) {
		return (peer.link() instanceof OutOfBandLink link) ? link.describePeer() : String.valueOf(peer.peerAddress());
	}

	@Override
	public void close() {
		// the peers still waiting for their "done": dropped with everything made for them
		for (OutOfBandRequest r : answered.close()) {
			r.close();
		}
		for (Pending p : new ArrayList<>(pending)) {
			p.drop();
		}
		closeQuietly(selector);
		closeQuietly(socket);
		selector = null;
		socket = null;
	}

	@Override
	public @Nullable String deviceName(ServerConnection server) {
		return server.running() ? server.queueDevice() : null;
	}

	static void closeQuietly(@Nullable AutoCloseable closeable) {
		if (closeable != null) {
			try {
				closeable.close();
			}
			catch (Exception ignored) {
				// a socket or selector: nothing to flush
			}
		}
	}

	/**
	 * Called by {@link OutOfBandRequest#accept} once its answer went out: the peer waits
	 * for its {@code "done"} from now on ({@link PendingAccepts#check}, at each turn).
	 * @throws AttemptFailedException STOPPED when a close (stopping) took the answered
	 * peers already (the caller drops this one)
	 */
	void answered(OutOfBandRequest request) {
		if (!answered.add(request, () -> {
		})) {
			throw new AttemptFailedException("STOPPED", "stopping");
		}
	}

	/** The link whose accept is under way (a wake-up closes it), or null. */
	void accepting(@Nullable OutOfBandLink link) {
		accepting = link;
	}

}
