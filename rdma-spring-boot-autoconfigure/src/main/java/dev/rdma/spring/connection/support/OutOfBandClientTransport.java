package dev.rdma.spring.connection.support;

import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.QueuePair;

import static dev.rdma.spring.connection.support.ConfiguredConnection.remaining;

/**
 * The {@link ClientTransport} of {@code exchange: out-of-band}: no rdma_cm.
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
 * <b>The connection's end.</b> With {@code out-of-band.liveness: tcp} (the default) the
 * TCP connection stays open as the liveness channel, polled every 100 ms: its end of
 * stream or reset (the server stopped, or closed this peer) ends the connection, as does
 * a failed completion of the QP ({@link PeerConnection#failure()}). With {@code none} the
 * client closes it after writing {@code "done"}, as {@code ibv_rc_pingpong}'s client
 * does, and only a failed completion ends the connection (a send to a server whose QP is
 * gone: RETRY_EXC_ERR). Stopping closes the peer connection in order: FIN on the socket
 * (none without it), up to half the shutdown timeout for the server's, QP to error,
 * drain, destroy.
 */
final class OutOfBandClientTransport implements ClientTransport {

	private static final long LIVENESS_POLL_MILLIS = 100;

	private static final End CLOSED = new End("DISCONNECTED", "the exchange connection closed");

	private final ConnectionSettings.OutOfBandOptions options;

	OutOfBandClientTransport(ConnectionSettings.OutOfBandOptions options) {
		this.options = options;
	}

	@Override
	public void open(ConfiguredConnection connection) {
		connection.openProtectionDomain();
	}

	@Override
	public Attempt newAttempt(ClientConnection connection) {
		return new LinkAttempt(connection, options.port(), options.liveness());
	}

	/** An attempt on a TCP connection of its own. */
	private static final class LinkAttempt extends PendingPeer implements Attempt {

		private final int port;

		private final ConnectionSettings.Liveness liveness;

		private volatile @Nullable OutOfBandLink link;

		/** Exchanged: stopping no longer closes the link (the peer connection does). */
		private volatile boolean exchanged;

		/** The thread in {@link #awaitEnd}, unparked by {@link #wakeUp}. */
		private volatile @Nullable Thread waiter;

		/**
		 * The channel of the TCP connect in progress (closed by {@link #wakeUp}: a
		 * connect to a host that does not answer would otherwise block a stop for up to
		 * {@code connect-timeout}).
		 */
		private volatile @Nullable SocketChannel connecting;

		/** {@link #wakeUp} was called before the connection was exchanged. */
		private volatile boolean woken;

		LinkAttempt(ClientConnection connection, int port, ConnectionSettings.Liveness liveness) {
			super(connection);
			this.port = port;
			this.liveness = liveness;
		}

		@Override
		public PeerConnection connect(long deadline) {
			SocketChannel ch = OutOfBandLink.open(settings.address());
			connecting = ch;
			OutOfBandLink link;
			try {
				// after publishing the channel: a wake-up that missed it set woken first
				if (woken || !connection.running()) {
					closeQuietly(ch);
					throw new AttemptFailedException("STOPPED",
							"connecting to the exchange server " + settings.address() + ": stopping");
				}
				link = OutOfBandLink.connect(ch, settings.address(), remaining(deadline));
			}
			catch (AttemptFailedException ex) {
				if (woken && !"STOPPED".equals(ex.kind())) {
					throw new AttemptFailedException("STOPPED", "connecting to the exchange server "
							+ settings.address() + ": woken up (stopping), the connect was closed", ex);
				}
				throw ex;
			}
			finally {
				connecting = null;
			}
			this.link = link;
			if (!connection.running()) {
				throw new AttemptFailedException("STOPPED", "stopping");
			}
			PeerConnection peer = newPeer(link);
			QueuePair qp = peer.queuePair();
			qp.moveToInit(port);
			peer.postReceives();
			link.exchangeAsClient(qp, OutOfBandLink.options(settings, remaining(deadline)), liveness, deadline);
			exchanged = true;
			return peer;
		}

		@Override
		public @Nullable End awaitEnd() {
			OutOfBandLink link = this.link;
			waiter = Thread.currentThread();
			try {
				while (link != null && connection.running()) {
					End failed = End.failureOf(peer());
					if (failed != null) {
						return failed;
					}
					if (!link.alive()) {
						return CLOSED;
					}
					LockSupport.parkNanos(this, LIVENESS_POLL_MILLIS * 1_000_000);
					if (Thread.currentThread().isInterrupted()) {
						return null;
					}
				}
				return null;
			}
			finally {
				waiter = null;
			}
		}

		@Override
		public void acknowledgeEnd() {
			// the end of the TCP connection needs no answer
		}

		@Override
		public void wakeUp() {
			if (!exchanged) {
				woken = true;
				SocketChannel ch = connecting;
				if (ch != null) {
					closeQuietly(ch); // ends a pending connect at once
				}
			}
			OutOfBandLink l = link;
			if (l != null && !exchanged) {
				l.close(); // ends a pending exchange read at once
			}
			Thread t = waiter;
			if (t != null) {
				LockSupport.unpark(t); // never blocks: also called on a poller thread
			}
		}

		private static void closeQuietly(SocketChannel ch) {
			try {
				ch.close();
			}
			catch (IOException ignored) {
				// never connected: nothing to flush
			}
		}

		@Override
		void release() {
			OutOfBandLink l = link;
			if (l != null) {
				l.close();
			}
		}

	}

}
