package dev.rdma.spring.connection.support;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.SocketChannel;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.QueuePair;

/**
 * A client's TCP connection to an {@link OutOfBandServerTransport}: refused, turned away
 * or accepted. The accept makes the peer connection, answers the client's record
 * ({@link OutOfBandLink#answerAsServer}) and hands the peer to the transport, which reads
 * the client's {@code "done"} without blocking ({@link #doneArrived}) until
 * {@code connect-timeout}.
 */
final class OutOfBandRequest extends PendingPeer implements ServerTransport.Request {

	private final OutOfBandServerTransport transport;

	private final ConnectionSettings.OutOfBandOptions options;

	private final SocketChannel client;

	/** The client's record, read before (null: read by the exchange). */
	private final byte @Nullable [] record;

	private @Nullable OutOfBandLink link;

	/** The accept's deadline ({@link System#nanoTime()}). */
	private long deadline;

	OutOfBandRequest(OutOfBandServerTransport transport, ConnectionSettings.OutOfBandOptions options,
			ServerConnection server, SocketChannel client, byte @Nullable [] record) {
		super(server);
		this.transport = transport;
		this.options = options;
		this.client = client;
		this.record = record;
	}

	@Override
	public boolean admitted() {
		return record != null;
	}

	@Override
	public String from() {
		OutOfBandLink l = link;
		if (l != null) {
			return l.describePeer();
		}
		try {
			return (client.getRemoteAddress() instanceof InetSocketAddress a) ? OutOfBandLink.format(a) : "?";
		}
		catch (IOException | RuntimeException ex) {
			return "? (" + ex.getMessage() + ")";
		}
	}

	@Override
	public String refusal() {
		return "turns a peer from " + from() + " away";
	}

	@Override
	public void turnAway() {
		OutOfBandServerTransport.closeQuietly(client);
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		try {
			return (client.getRemoteAddress() instanceof InetSocketAddress a) ? a : null;
		}
		catch (IOException | RuntimeException ex) {
			return null;
		}
	}

	@Override
	public byte[] privateData() {
		return new byte[0];
	}

	@Override
	public void refuse(byte[] rejectData) {
		// nothing is sent: the client reads the end of the stream before any record
		OutOfBandServerTransport.closeQuietly(client);
	}

	/**
	 * Everything up to the answer, without waiting for the client's {@code "done"}: the
	 * peer waits for it from then on (the transport checks it each turn), and null is
	 * returned.
	 */
	@Override
	public @Nullable PeerConnection accept(long deadline) {
		try {
			OutOfBandLink link = OutOfBandLink.accepted(client);
			this.link = link;
			transport.accepting(link);
			if (!connection.running()) {
				throw new AttemptFailedException("STOPPED", "stopping");
			}
			this.deadline = deadline;
			PeerConnection peer = newPeer(link);
			QueuePair qp = peer.queuePair();
			qp.moveToInit(options.port());
			peer.postReceives();
			link.answerAsServer(qp, OutOfBandLink.options(settings, settings.connectTimeout()), deadline, record);
			transport.answered(this);
			return null;
		}
		finally {
			transport.accepting(null);
		}
	}

	/**
	 * Whether the client's {@code "done"} arrived (the exchange then ends as
	 * {@code liveness} says); never blocks.
	 * @throws AttemptFailedException when the exchange failed, or the
	 * {@code connect-timeout} of the accept passed
	 */
	boolean doneArrived() {
		OutOfBandLink l = link;
		if (l == null) {
			throw new AttemptFailedException("ERROR", "exchange with " + from() + ": no link");
		}
		if (l.doneArrived()) {
			l.finishExchange(options.liveness());
			return true;
		}
		if (System.nanoTime() - deadline >= 0) {
			throw new AttemptFailedException("TIMEOUT",
					l.describePeer() + " did not send its \"done\" within rdma.connections." + settings.name()
							+ ".connect-timeout (" + settings.connectTimeout() + ")");
		}
		return false;
	}

	@Override
	void release() {
		OutOfBandLink l = link;
		if (l != null) {
			l.close();
		}
		else {
			OutOfBandServerTransport.closeQuietly(client);
		}
	}

}
