package dev.rdma.spring.connection.support;

import java.time.Duration;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

import static dev.rdma.spring.connection.support.ConfiguredConnection.expect;
import static dev.rdma.spring.connection.support.ConfiguredConnection.remaining;

/**
 * The rdma_cm {@link ClientTransport}.
 *
 * <p>
 * One attempt: a new id, {@code rdma_resolve_addr} (from {@code source} when set) and
 * {@code rdma_resolve_route}, a new {@link PeerConnection} (QP on the application's
 * queues) moved to INIT with every receive buffer posted, {@code rdma_connect} with the
 * configured parameters, then (CONNECT_RESPONSE) INIT, RTR, RTS and
 * {@code rdma_establish}; all within {@code connect-timeout}. The connection ends with
 * DISCONNECTED, DEVICE_REMOVAL, CONNECT_ERROR or UNREACHABLE on the id, or with a failed
 * completion of its QP ({@link PeerConnection#failure()}), answered with the QP to error
 * and {@code rdma_disconnect} (the DREP the peer's disconnect waits for, or a DREQ).
 */
final class RdmaCmClientTransport implements ClientTransport {

	/** How long one look for the end of the connection waits. */
	private static final Duration END_POLL = Duration.ofMillis(500);

	@Override
	public void open(ConfiguredConnection connection) {
		connection.open();
	}

	@Override
	public @Nullable Attempt newAttempt(ClientConnection connection) {
		EventChannel channel = connection.channel;
		return (channel != null) ? new CmAttempt(connection, channel) : null;
	}

	/** An attempt on an id of its own. */
	private static final class CmAttempt extends PendingPeer implements Attempt {

		private final EventChannel channel;

		private volatile @Nullable ConnectionId id;

		/** {@link #wakeUp()} ran: an id published after it missed the wake-up. */
		private volatile boolean woken;

		CmAttempt(ClientConnection connection, EventChannel channel) {
			super(connection);
			this.channel = channel;
		}

		@Override
		public PeerConnection connect(long deadline) {
			ConnectionId id = channel.createId();
			this.id = id;
			// after publishing the id: a wake-up (a stop) that found no id set woken
			// first,
			// and the attempt must not go on to resolve, build a peer and connect
			if (woken || !connection.running()) {
				throw new AttemptFailedException("STOPPED", "rdma_resolve_addr " + settings.address() + ": stopping");
			}
			// at most one resolution attempt's time (as ConnectionId.connect): a first
			// contact whose neighbour update the kernel missed resolves when its timer
			// fires, not at the end of the connect timeout; an attempt that ends in
			// ADDR_ERROR is this connection attempt's failure, and the retry policy's
			// next attempt resolves again
			id.resolveAddress(settings.source(), settings.address(), ConnectionId.resolveAttempt(remaining(deadline)));
			expect(id, "rdma_resolve_addr " + settings.address(), deadline, CmEventType.ADDR_RESOLVED);
			id.resolveRoute(remaining(deadline));
			expect(id, "rdma_resolve_route " + settings.address(), deadline, CmEventType.ROUTE_RESOLVED);
			PeerConnection peer = newPeer(id);
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

		@Override
		public @Nullable End awaitEnd() {
			ConnectionId id = this.id;
			while (id != null && connection.running()) {
				End failed = End.failureOf(peer());
				if (failed != null) {
					return failed;
				}
				CmEvent e;
				try {
					e = id.getEvent(END_POLL);
				}
				catch (IllegalStateException closed) {
					return connection.running() ? end(CmEventType.DEVICE_REMOVAL) : null;
				}
				if (e == null) {
					continue;
				}
				switch (e.type()) {
					case DISCONNECTED, DEVICE_REMOVAL, CONNECT_ERROR, UNREACHABLE -> {
						return end(e.type());
					}
					default -> {
						// ADDR_CHANGE, TIMEWAIT_EXIT: nothing to do
					}
				}
			}
			return null;
		}

		private static End end(CmEventType type) {
			return new End(type.name(), type.toString());
		}

		@Override
		public void acknowledgeEnd() {
			PeerConnection p = peer();
			if (p != null) {
				ConfiguredConnection.answerDisconnect(p);
			}
		}

		@Override
		public void wakeUp() {
			woken = true;
			ConnectionId i = id;
			if (i != null) {
				i.wakeUp();
			}
		}

		@Override
		void release() {
			ConnectionId i = id;
			if (i != null) {
				i.close();
			}
		}

	}

}
