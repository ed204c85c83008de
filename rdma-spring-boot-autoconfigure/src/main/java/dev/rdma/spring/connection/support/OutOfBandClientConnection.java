package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.QueuePair;

/**
 * A {@code connect} connection with {@code exchange: out-of-band}: the behaviour of a
 * {@link ClientConnection} (a thread of its own, {@code rdma-connect-<name>}, connects,
 * waits for the connection's end and connects again, with back-off after each failed
 * attempt, until the application stops), without rdma_cm.
 *
 * <p>
 * One attempt, within {@code connect-timeout}: a TCP connection to {@code connect} (the
 * server's exchange address; refused while the server is absent), a new
 * {@link PeerConnection} on the device of the connection's queues, its QP moved to INIT
 * on the configured port with every receive buffer posted, then the exchange of
 * {@link OutOfBandLink} (endpoint records in {@code ibv_rc_pingpong}'s format, RTR and
 * RTS with the server's QPN, PSN and GID).
 *
 * <p>
 * <b>The connection's end.</b> The TCP connection stays open as the liveness channel; the
 * thread polls it every 100 ms: its end of stream or reset (the server stopped, or closed
 * this peer) ends the connection: DISCONNECTED, the peer connection closed (QP to error,
 * flushed work requests drained through the pollers, QP, buffers and socket destroyed),
 * and a new attempt after the first back-off interval. Stopping closes the peer
 * connection in order: FIN on the socket, up to half the shutdown timeout for the
 * server's, QP to error, drain, destroy.
 */
public final class OutOfBandClientConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(OutOfBandClientConnection.class);

	private static final long LIVENESS_POLL_MILLIS = 100;

	private volatile @Nullable PeerConnection current;

	/** The link of an attempt not yet established (closed by {@link #stop}). */
	private volatile @Nullable OutOfBandLink attempt;

	private volatile boolean running;

	private @Nullable Thread thread;

	private final Object sleeper = new Object();

	public OutOfBandClientConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
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
		running = true;
		state = ConnectionState.CONNECTING;
		Thread t = new Thread(this::run, "rdma-connect-" + name());
		t.setDaemon(true);
		thread = t;
		t.start();
	}

	private void run() {
		int failures = 0;
		while (running) {
			state = ConnectionState.CONNECTING;
			OutOfBandLink link = null;
			PeerConnection peer = null;
			try {
				long deadline = System.nanoTime() + settings.connectTimeout().toNanos();
				link = OutOfBandLink.connect(settings.address(), remaining(deadline));
				attempt = link;
				if (!running) {
					throw new AttemptFailedException("STOPPED", "stopping");
				}
				peer = newPeer(link);
				QueuePair qp = peer.queuePair();
				qp.moveToInit(port());
				peer.postReceives();
				link.exchangeAsClient(qp, OutOfBandLink.options(settings, remaining(deadline)), deadline);
				attempt = null;
				current = peer;
				peer.established();
				state = ConnectionState.ESTABLISHED;
				counters.established.incrementAndGet();
				logger.info("RDMA connection '" + name() + "' established out of band to " + settings.address() + " on "
						+ peer.deviceName() + (failures > 0 ? " after " + failures + " failed attempt(s)" : ""));
				failures = 0;
				if (!awaitEnd(link)) {
					return; // stopping: stop() closes the peer
				}
				counters.connectionError("DISCONNECTED");
				current = null;
				peer.peerDisconnected();
				state = ConnectionState.DISCONNECTED;
				logger.warn("RDMA connection '" + name() + "' to " + settings.address()
						+ " ended (the exchange connection closed); reconnecting");
				peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
				peer = null;
				failures = 1;
			}
			catch (RuntimeException ex) {
				current = null;
				attempt = null;
				if (!running) {
					closeAttempt(peer, link);
					return;
				}
				failures++;
				counters.connectionError(kindOf(ex));
				String message = "RDMA connection '" + name() + "' to " + settings.address()
						+ " (out of band): attempt " + failures + " failed (" + ex.getMessage() + "); next attempt in "
						+ settings.retry().interval(failures).toMillis() + " ms";
				if (failures == 1 || failures % 10 == 0) {
					logger.warn(message);
				}
				else {
					logger.debug(message);
				}
				closeAttempt(peer, link);
				state = ConnectionState.DISCONNECTED;
				if (settings.retry().maxAttempts() > 0 && failures >= settings.retry().maxAttempts()) {
					logger.error("RDMA connection '" + name() + "' gives up after " + failures + " attempts");
					return;
				}
			}
			backOff(settings.retry().interval(Math.max(1, failures)));
		}
	}

	private int port() {
		ConnectionSettings.OutOfBandOptions oob = settings.outOfBand();
		return oob == null ? 1 : oob.port();
	}

	/** Polls the link until it ends (true) or the connection stops (false). */
	private boolean awaitEnd(OutOfBandLink link) {
		synchronized (sleeper) {
			while (running) {
				if (!link.alive()) {
					return true;
				}
				try {
					sleeper.wait(LIVENESS_POLL_MILLIS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return false;
				}
			}
		}
		return false;
	}

	private void closeAttempt(@Nullable PeerConnection peer, @Nullable OutOfBandLink link) {
		if (peer != null) {
			peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
		}
		else if (link != null) {
			link.close();
		}
	}

	private void backOff(Duration wait) {
		long deadline = System.nanoTime() + wait.toNanos();
		synchronized (sleeper) {
			while (running) {
				long left = deadline - System.nanoTime();
				if (left <= 0) {
					return;
				}
				try {
					sleeper.wait(Math.max(1, left / 1_000_000));
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return;
				}
			}
		}
	}

	private static Duration remaining(long deadline) {
		return Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
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
		synchronized (sleeper) {
			sleeper.notifyAll();
		}
		OutOfBandLink a = attempt;
		if (a != null) {
			a.close(); // ends a pending connect or exchange read at once
		}
		if (t != null) {
			try {
				t.join(Math.max(1, (deadline - System.nanoTime()) / 2_000_000));
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}
		PeerConnection peer = current;
		current = null;
		if (peer != null) {
			peer.close(Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime())), ConnectionState.CLOSED);
		}
		state = ConnectionState.CLOSED;
		closeShared();
	}

	@Override
	PeerConnection sendTarget() {
		PeerConnection peer = current;
		if (peer == null) {
			throw notEstablished();
		}
		return peer;
	}

	@Override
	public ConnectionState state() {
		return state;
	}

	@Override
	public boolean isUp() {
		return state == ConnectionState.ESTABLISHED;
	}

	@Override
	public @Nullable String deviceName() {
		PeerConnection peer = current;
		return peer == null ? null : peer.deviceName();
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		PeerConnection peer = current;
		return peer == null ? null : peer.peerAddress();
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		PeerConnection peer = current;
		return peer == null ? null : peer.localAddress();
	}

	@Override
	public List<RdmaConnection> peers() {
		PeerConnection peer = current;
		return peer == null ? List.of() : List.of(peer);
	}

	@Override
	String describeAddress() {
		return "connect " + settings.address() + " (out of band)";
	}

	@Override
	public String toString() {
		return "OutOfBandClientConnection[" + name() + " -> " + settings.address() + ", " + state + "]";
	}

}
