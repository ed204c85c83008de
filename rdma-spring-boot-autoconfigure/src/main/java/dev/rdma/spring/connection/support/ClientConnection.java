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
import dev.rdma.spring.connection.event.RdmaConnectionAttemptFailedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEstablishedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionGaveUpEvent;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.CompletionQueue;

/**
 * A {@code connect} connection: a thread of its own ({@code rdma-connect-<name>})
 * connects, waits for the connection's end, and connects again, with back-off after each
 * failed attempt, until the application stops. How one attempt connects and notices the
 * end is its {@link ClientTransport}'s: rdma_cm ({@link RdmaCmClientTransport}) or the
 * TCP exchange of {@code exchange: out-of-band} ({@link OutOfBandClientTransport}).
 *
 * <p>
 * <b>States.</b> CONNECTING while an attempt runs and during the back-off before the next
 * one (also after an end), ESTABLISHED while connected, DISCONNECTED only once it gave up
 * ({@code retry.max-attempts} failed attempts in a row), CLOSED once stopped.
 *
 * <p>
 * <b>The connection's end</b> (an rdma_cm event, the out-of-band link's end, or a failed
 * completion of the QP): the client CONNECTING again, the peer connection closed as
 * DISCONNECTED (QP to error, flushed work requests drained through the pollers, QP,
 * buffers and link destroyed), and a new attempt after the first back-off interval.
 * Stopping wakes the attempt, waits up to half the shutdown timeout for the thread, then
 * closes the current peer connection.
 *
 * <p>
 * <b>Events</b> (published on the thread): established, ended, each failed attempt, and
 * giving up. {@link #disconnect()} ends the loop as a stop would, but the thread closes
 * the current peer itself (CLOSED, an ended event) and the client stays DISCONNECTED,
 * still running for the registry, whose {@code stop()} and {@code start()} connect it
 * again.
 */
public final class ClientConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(ClientConnection.class);

	private final ClientTransport transport;

	private volatile @Nullable PeerConnection current;

	private volatile ClientTransport.@Nullable Attempt attempt;

	private final Object sleeper = new Object();

	/** {@link #disconnect()} was called since the last {@link #start()}. */
	private volatile boolean disconnecting;

	public ClientConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		this(settings, sendCq, receiveCq, routers, listener, ClientTransport.of(settings));
	}

	/** A client connecting through {@code transport} (tests give one of their own). */
	ClientConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener,
			ClientTransport transport) {
		super(settings, sendCq, receiveCq, routers, listener);
		this.transport = transport;
	}

	@Override
	synchronized void start() {
		if (running) {
			return;
		}
		transport.open(this);
		state = ConnectionState.CONNECTING;
		disconnecting = false;
		startThread("rdma-connect-", this::run);
	}

	/** False also once the application disconnected: the loop ends as for a stop. */
	@Override
	boolean running() {
		return !disconnecting && super.running();
	}

	private void run() {
		try {
			connectLoop();
		}
		finally {
			if (disconnecting && onOwnThread()) {
				disconnected();
			}
		}
	}

	private void connectLoop() {
		int failures = 0;
		while (running()) {
			state = ConnectionState.CONNECTING;
			ClientTransport.Attempt a = transport.newAttempt(this);
			if (a == null) {
				return;
			}
			attempt = a;
			try {
				PeerConnection peer = a.connect(Deadlines.after(settings.connectTimeout()));
				peer.onFailure(a::wakeUp);
				if (!established(peer, failures)) {
					// stopped (or restarted) meanwhile: this thread's peer is not listed
					a.close();
					return;
				}
				failures = 0;
				publish(new RdmaConnectionEstablishedEvent(this, peer, peer.peerAddress(), peer.deviceName()));
				ClientTransport.End end = a.awaitEnd();
				if (end == null) {
					return; // stopping: stop() closes the peer
				}
				ended(peer, end, a);
				// a new count: retry.max-attempts failed attempts after this end, the
				// first reconnect after interval(1), as the attempts of a first connect
				failures = 0;
			}
			catch (RuntimeException ex) {
				if (!running()) {
					a.close();
					return;
				}
				current = null;
				failures++;
				a.close(); // first: nothing in the log line may leak the attempt
				boolean givesUp = settings.retry().maxAttempts() > 0 && failures >= settings.retry().maxAttempts();
				failed(ex, failures, givesUp);
				if (givesUp) {
					// until stopped and started again
					state = ConnectionState.DISCONNECTED;
					logger.error("RDMA connection '" + name() + "' gives up after " + failures
							+ " failed attempts in a row (rdma.connections." + name() + ".retry.max-attempts="
							+ settings.retry().maxAttempts() + ")");
					publish(new RdmaConnectionGaveUpEvent(this, failures, ex));
					return;
				}
				// the back-off before the next attempt
				state = ConnectionState.CONNECTING;
			}
			finally {
				attempt = null;
			}
			backOff(settings.retry().interval(Math.max(1, failures)));
		}
	}

	/**
	 * Lists {@code peer} as the current connection, unless this thread no longer runs:
	 * under the lock of {@link #stopRunning} and {@link #startThread}, so that a peer is
	 * either listed (and closed by stop) or refused (and closed by its thread).
	 */
	private synchronized boolean established(PeerConnection peer, int failures) {
		if (!running()) {
			return false;
		}
		current = peer;
		peer.established();
		state = ConnectionState.ESTABLISHED;
		counters.established.incrementAndGet();
		logger.info("RDMA connection '" + name() + "' established" + exchange.via() + " to " + settings.address()
				+ " on " + peer.deviceName() + (failures > 0 ? " after " + failures + " failed attempt(s)" : ""));
		return true;
	}

	private void ended(PeerConnection peer, ClientTransport.End end, ClientTransport.Attempt a) {
		counters.connectionError(end.kind());
		current = null;
		peer.peerDisconnected();
		state = ConnectionState.CONNECTING; // the back-off, then the next attempt
		logger.warn("RDMA connection '" + name() + "' to " + settings.address() + " ended (" + end.description()
				+ "); reconnecting");
		a.acknowledgeEnd();
		closeEnded(peer, end.kind(), ConnectionState.DISCONNECTED);
	}

	/**
	 * After {@link #disconnect()}, on this client's thread: closes the current peer (an
	 * ended event) and stays DISCONNECTED until started again.
	 */
	private void disconnected() {
		PeerConnection peer;
		synchronized (this) {
			if (!running) {
				return; // stopped meanwhile: stop() closes the peer
			}
			peer = current;
			current = null;
			state = ConnectionState.DISCONNECTED;
		}
		if (peer != null) {
			logger.info("RDMA connection '" + name() + "' to " + settings.address()
					+ " disconnected by the application (disconnect()); it reconnects once started again");
			closeEnded(peer, "disconnect()", ConnectionState.CLOSED);
		}
	}

	/**
	 * Ends this client's connection (or its attempts) and keeps it from reconnecting: the
	 * thread closes the peer and ends; see {@link RdmaConnection#disconnect()}.
	 */
	@Override
	public void disconnect() {
		synchronized (this) {
			if (!running || disconnecting) {
				return;
			}
			disconnecting = true;
		}
		PeerConnection peer = current;
		if (peer != null) {
			peer.requestDisconnect(); // sends refused from now on
		}
		synchronized (sleeper) {
			sleeper.notifyAll();
		}
		ClientTransport.Attempt a = attempt;
		if (a != null) {
			a.wakeUp();
		}
	}

	@Override
	void peerDisconnectRequested(PeerConnection peer) {
		if (peer == current) {
			disconnect();
		}
	}

	private void failed(RuntimeException ex, int failures, boolean givesUp) {
		String kind = kindOf(ex);
		counters.connectionError(kind);
		String message = "RDMA connection '" + name() + "' to " + settings.address() + exchange.qualifier()
				+ ": attempt " + failures + " failed (" + ex.getMessage() + ")"
				+ (givesUp ? "" : "; next attempt in " + settings.retry().interval(failures).toMillis() + " ms");
		if (givesUp || failures == 1 || failures % 10 == 0) {
			logger.warn(message);
		}
		else {
			logger.debug(message);
		}
		publish(new RdmaConnectionAttemptFailedEvent(this, failures, kind, ex,
				givesUp ? null : settings.retry().interval(failures)));
	}

	private void backOff(Duration wait) {
		long deadline = Deadlines.after(wait);
		synchronized (sleeper) {
			while (running()) {
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

	@Override
	void stop(long deadline) {
		if (!stopRunning()) {
			return;
		}
		try {
			synchronized (sleeper) {
				sleeper.notifyAll();
			}
			ClientTransport.Attempt a = attempt;
			if (a != null) {
				a.wakeUp();
			}
			joinThread(deadline);
			PeerConnection peer = current;
			current = null;
			if (peer != null) {
				peer.close(remaining(deadline), ConnectionState.CLOSED);
			}
		}
		finally {
			// an attempt that ended with this stop, or a peer whose end the thread was
			// handling, when this stop runs on a poller thread (also when the stop
			// failed: no handed-over peer is left unclosed)
			for (PeerConnection handed : takeHandedOver()) {
				handed.finishClose();
			}
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
		return (peer != null) ? peer.deviceName() : null;
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		PeerConnection peer = current;
		return (peer != null) ? peer.peerAddress() : null;
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		PeerConnection peer = current;
		return (peer != null) ? peer.localAddress() : null;
	}

	@Override
	public List<RdmaConnection> peers() {
		PeerConnection peer = current;
		return (peer != null) ? List.of(peer) : List.of();
	}

	@Override
	String describeAddress() {
		return "connect " + settings.address() + exchange.qualifier();
	}

	@Override
	public String toString() {
		return "ClientConnection[" + name() + " -> " + settings.address() + exchange.qualifier() + ", " + state + "]";
	}

}
