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
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

/**
 * A {@code connect} connection: a thread of its own ({@code rdma-connect-<name>})
 * connects through rdma_cm, waits for the connection's end, and connects again, with
 * back-off after each failed attempt, until the application stops.
 *
 * <p>
 * One attempt: a new id, {@code rdma_resolve_addr} (from {@code source} when set) and
 * {@code rdma_resolve_route}, a new {@link PeerConnection} (QP on the application's
 * queues) moved to INIT with every receive buffer posted, {@code rdma_connect} with the
 * configured parameters, then (CONNECT_RESPONSE) INIT, RTR, RTS and
 * {@code rdma_establish}; all within {@code connect-timeout}.
 */
public final class ClientConnection extends ConfiguredConnection {

	private static final Log logger = LogFactory.getLog(ClientConnection.class);

	private volatile @Nullable PeerConnection current;

	private volatile @Nullable ConnectionId attempt;

	private volatile boolean running;

	private @Nullable Thread thread;

	private final Object sleeper = new Object();

	public ClientConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		super(settings, sendCq, receiveCq, routers, listener);
	}

	@Override
	synchronized void start() {
		if (running) {
			return;
		}
		open();
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
			EventChannel ch = channel;
			if (ch == null) {
				return;
			}
			ConnectionId id = null;
			PeerConnection peer = null;
			try {
				id = ch.createId();
				attempt = id;
				peer = connect(id);
				current = peer;
				peer.established();
				state = ConnectionState.ESTABLISHED;
				counters.established.incrementAndGet();
				logger.info("RDMA connection '" + name() + "' established to " + settings.address() + " on "
						+ peer.deviceName() + (failures > 0 ? " after " + failures + " failed attempt(s)" : ""));
				failures = 0;
				CmEventType end = awaitEnd(id);
				if (end == null) {
					return; // stopping: stop() closes the peer
				}
				counters.connectionError(end.name());
				current = null;
				peer.peerDisconnected();
				state = ConnectionState.DISCONNECTED;
				logger.warn("RDMA connection '" + name() + "' to " + settings.address() + " ended (" + end
						+ "); reconnecting");
				answerDisconnect(peer);
				peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
				peer = null;
				failures = 1;
			}
			catch (RuntimeException ex) {
				current = null;
				if (!running) {
					closeAttempt(peer, id);
					return;
				}
				failures++;
				counters.connectionError(kindOf(ex));
				String message = "RDMA connection '" + name() + "' to " + settings.address() + ": attempt " + failures
						+ " failed (" + ex.getMessage() + "); next attempt in "
						+ settings.retry().interval(failures).toMillis() + " ms";
				if (failures == 1 || failures % 10 == 0) {
					logger.warn(message);
				}
				else {
					logger.debug(message);
				}
				closeAttempt(peer, id);
				state = ConnectionState.DISCONNECTED;
				if (settings.retry().maxAttempts() > 0 && failures >= settings.retry().maxAttempts()) {
					logger.error("RDMA connection '" + name() + "' gives up after " + failures + " attempts");
					return;
				}
			}
			finally {
				attempt = null;
			}
			backOff(settings.retry().interval(Math.max(1, failures)));
		}
	}

	private PeerConnection connect(ConnectionId id) {
		long deadline = System.nanoTime() + settings.connectTimeout().toNanos();
		id.resolveAddress(settings.source(), settings.address(), remaining(deadline));
		expect(id, "rdma_resolve_addr " + settings.address(), deadline, CmEventType.ADDR_RESOLVED);
		id.resolveRoute(remaining(deadline));
		expect(id, "rdma_resolve_route " + settings.address(), deadline, CmEventType.ROUTE_RESOLVED);
		PeerConnection peer = newPeer(id);
		try {
			QueuePair qp = peer.queuePair();
			id.moveQueuePair(qp, QueuePair.State.INIT);
			peer.postReceives();
			id.connect(qp, settings.cm(), peer.privateData());
			CmEvent response = expect(id, "rdma_connect " + settings.address(), deadline, CmEventType.CONNECT_RESPONSE,
					CmEventType.ESTABLISHED);
			peer.remoteRegion(RemoteRegion.parse(response.privateData()));
			if (response.type() == CmEventType.CONNECT_RESPONSE) {
				// INIT again: the access flags the CM computes once the server answered
				// (as librdmacm's ucma_modify_qp_rtr does)
				id.moveQueuePair(qp, QueuePair.State.INIT);
				id.moveQueuePair(qp, QueuePair.State.RTR);
				id.moveQueuePair(qp, QueuePair.State.RTS);
				id.establish();
			}
			return peer;
		}
		catch (RuntimeException ex) {
			peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
			throw ex;
		}
	}

	/** Waits for the connection's end: its event type, or null when stopping. */
	private @Nullable CmEventType awaitEnd(ConnectionId id) {
		while (running) {
			CmEvent e;
			try {
				e = id.getEvent(Duration.ofMillis(500));
			}
			catch (IllegalStateException closed) {
				return running ? CmEventType.DEVICE_REMOVAL : null;
			}
			if (e == null) {
				continue;
			}
			switch (e.type()) {
				case DISCONNECTED, DEVICE_REMOVAL, CONNECT_ERROR, UNREACHABLE -> {
					return e.type();
				}
				default -> {
					// ADDR_CHANGE, TIMEWAIT_EXIT: nothing to do
				}
			}
		}
		return null;
	}

	/** The peer disconnected: QP to error and the DREP its rdma_disconnect waits for. */
	private static void answerDisconnect(PeerConnection peer) {
		try {
			peer.queuePair().moveToError();
		}
		catch (RuntimeException ignored) {
			// already in error
		}
		try {
			peer.connectionId().disconnect();
		}
		catch (RuntimeException ignored) {
			// the id disconnected already
		}
	}

	private void closeAttempt(@Nullable PeerConnection peer, @Nullable ConnectionId id) {
		if (peer != null) {
			peer.close(settings.closeTimeout(), ConnectionState.DISCONNECTED);
		}
		else if (id != null) {
			id.close();
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
		ConnectionId a = attempt;
		if (a != null) {
			a.wakeUp();
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
		return "connect " + settings.address();
	}

	@Override
	public String toString() {
		return "ClientConnection[" + name() + " -> " + settings.address() + ", " + state + "]";
	}

}
