package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.context.ApplicationEventPublisher;

import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.spring.connection.ReadStream;
import dev.rdma.spring.connection.SendBatch;
import dev.rdma.spring.connection.SendBuffer;
import dev.rdma.spring.connection.event.RdmaConnectionEndedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEvent;
import dev.rdma.spring.listener.PollerThreads;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.RdmaException;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

/**
 * What a client and a server connection share: their settings and counters, the event
 * channel and protection domain they create when they start (on the device of their
 * completion queues), their thread ({@code rdma-connect-<name>} or
 * {@code rdma-accept-<name>}) and its stopping, the making of a {@link PeerConnection}
 * for an id (or an out-of-band link), and the waiting for one rdma_cm event within a
 * deadline. A {@link ClientConnection} connects through a {@link ClientTransport}, a
 * {@link ServerConnection} accepts through a {@link ServerTransport}: rdma_cm, or the TCP
 * exchange of {@code exchange: out-of-band}.
 */
public abstract sealed class ConfiguredConnection extends SettingsConnection
		permits ClientConnection, ServerConnection {

	private static final Log logger = LogFactory.getLog(ConfiguredConnection.class);

	/** How the queue pairs are connected (and how messages name it). */
	final Exchange exchange;

	private final CompletionQueue sendCq;

	private final CompletionQueue receiveCq;

	private final List<CompletionRouter> routers;

	private final Supplier<@Nullable MessageListenerBinding> listener;

	@Nullable EventChannel channel;

	@Nullable ProtectionDomain pd;

	volatile ConnectionState state = ConnectionState.NEW;

	/** Started and not stopped (see {@link #running()} for the thread's loop). */
	volatile boolean running;

	/**
	 * The thread of the latest start; a thread of an earlier start that outlived its stop
	 * is no longer this, and never resumes ({@link #running()}).
	 */
	private volatile @Nullable Thread thread;

	/**
	 * While a stop that runs on a poller thread waits for this connection's thread: the
	 * peers whose close that thread handed over to the stopper ({@link #handOver}); null
	 * otherwise. Guarded by {@code this}.
	 */
	private @Nullable List<PeerConnection> handedOver;

	/** Whether {@link #handedOver} is set (the lock-free check of {@link #handOver}). */
	private volatile boolean stoppingOnPoller;

	/** Where the connection's events go (the registry sets the context's publisher). */
	private volatile ApplicationEventPublisher events = (event) -> {
	};

	ConfiguredConnection(ConnectionSettings settings, CompletionQueue sendCq, CompletionQueue receiveCq,
			List<CompletionRouter> routers, Supplier<@Nullable MessageListenerBinding> listener) {
		super(settings, new ConnectionCounters());
		this.exchange = Exchange.of(settings);
		this.sendCq = sendCq;
		this.receiveCq = receiveCq;
		this.routers = routers;
		this.listener = listener;
	}

	/** The settings this connection was made with. */
	public ConnectionSettings settings() {
		return settings;
	}

	/** The live counters (the meters read them). */
	public ConnectionCounters counters() {
		return counters;
	}

	/** Publishes this connection's events through {@code publisher}. */
	public void setEventPublisher(ApplicationEventPublisher publisher) {
		this.events = publisher;
	}

	/**
	 * Publishes {@code event} on this connection's own thread (never a poller's); a
	 * listener that throws is logged, and the thread goes on.
	 */
	final void publish(RdmaConnectionEvent event) {
		try {
			events.publishEvent(event);
		}
		catch (RuntimeException ex) {
			logger.warn("A listener of " + event + " threw", ex);
		}
	}

	/**
	 * Closes {@code peer}, which ended for {@code kind} (an rdma_cm event, a failed
	 * completion's status, or the application's {@code disconnect()}), as
	 * {@code finalState}, then publishes its ended event.
	 */
	final void closeEnded(PeerConnection peer, String kind, ConnectionState finalState) {
		InetSocketAddress address = peer.peerAddress(); // gone once the link is closed
		RdmaConnectionEndedEvent.Cause cause = peer.disconnectRequested() ? RdmaConnectionEndedEvent.Cause.APPLICATION
				: (kind.equals(peer.failure()) ? RdmaConnectionEndedEvent.Cause.FAILED_COMPLETION
						: RdmaConnectionEndedEvent.Cause.DISCONNECTED);
		peer.close(settings.closeTimeout(), finalState);
		publish(new RdmaConnectionEndedEvent(this, peer, address, cause, kind));
	}

	/**
	 * The application called {@code disconnect()} on {@code peer}, one of this
	 * connection's (on any thread, a poller's too: never blocks).
	 */
	abstract void peerDisconnectRequested(PeerConnection peer);

	/** Whether the current thread is this connection's latest thread. */
	final boolean onOwnThread() {
		return Thread.currentThread() == thread;
	}

	/** Creates the channel and the PD; the subclass then connects or listens. */
	void open() {
		channel = EventChannel.create();
		try {
			pd = sendCq.context().allocateProtectionDomain();
		}
		catch (RuntimeException ex) {
			channel.close();
			channel = null;
			throw ex;
		}
	}

	/** Creates the PD only (an out-of-band connection has no rdma_cm channel). */
	void openProtectionDomain() {
		pd = sendCq.context().allocateProtectionDomain();
	}

	/** The RDMA device of the completion queues (that of every peer). */
	String queueDevice() {
		return sendCq.context().deviceName();
	}

	/**
	 * Closes the PD and the channel (every peer closed before); on a poller thread once
	 * its poll has ended, after the peers' QPs (see {@link PollerThreads}).
	 */
	void closeShared() {
		ProtectionDomain p = pd;
		EventChannel c = channel;
		pd = null;
		channel = null;
		if (p != null && !PollerThreads.closeWhenPollEnds(p)) {
			try {
				p.close();
			}
			catch (RuntimeException ex) {
				logger.warn("Closing the protection domain of connection '" + name() + "' failed", ex);
			}
		}
		if (c != null && !PollerThreads.closeWhenPollEnds(c)) {
			c.close();
		}
	}

	/** Starts connecting or listening; called by the registry, after the pollers run. */
	abstract void start();

	/** Stops, closing every peer, by {@code deadline} ({@link System#nanoTime()}). */
	abstract void stop(long deadline);

	/**
	 * Whether started and not stopped (what the loops and the transports check between
	 * their steps). False on a thread of an earlier start of this connection: one that
	 * outlived its {@link #stop} (its join timed out, e.g. in a connect that could not be
	 * woken) must end, not run as a second loop next to the thread of a later
	 * {@link #start}.
	 */
	boolean running() {
		if (!running) {
			return false;
		}
		return !(Thread.currentThread() instanceof LoopThread loop) || loop.connection != this || loop == thread;
	}

	/**
	 * Marks this connection running and starts its daemon thread {@code <prefix><name>},
	 * which replaces the thread of an earlier start (that one sees {@link #running()}
	 * false from now on).
	 */
	final synchronized void startThread(String prefix, Runnable loop) {
		Thread t = new LoopThread(this, loop, prefix + name());
		t.setDaemon(true);
		handedOver = null; // a new start hands nothing over
		stoppingOnPoller = false;
		thread = t;
		running = true;
		t.start();
	}

	/** The thread of one start of a connection. */
	private static final class LoopThread extends Thread {

		final ConfiguredConnection connection;

		LoopThread(ConfiguredConnection connection, Runnable loop, String name) {
			super(loop, name);
			this.connection = connection;
		}

	}

	/**
	 * Ends the loop of the thread: false when this connection is not running (stopping is
	 * idempotent). On a poller thread (a listener closing the context), the thread hands
	 * the peers it closes from now on over to this stop ({@link #handOver}) until
	 * {@link #takeHandedOver()}.
	 */
	final synchronized boolean stopRunning() {
		if (!running) {
			return false;
		}
		running = false;
		if (PollerThreads.isPollerThread()) {
			handedOver = new ArrayList<>();
			stoppingOnPoller = true;
		}
		return true;
	}

	/**
	 * Asked by the close of one of this connection's peers (on a thread that is not a
	 * poller) before it waits for the pollers or destroys the QP: true when a stop on a
	 * poller thread waits for this connection's thread, which must then not wait for that
	 * poller (it may have to deliver the flushed work requests, to return from the
	 * listener call the close waits for, or to end the batch {@code ibv_destroy_qp} waits
	 * for, and it waits in {@link #joinThread}): the peer is listed for the stopper,
	 * which finishes its close once the thread ended.
	 */
	private boolean handOver(PeerConnection peer) {
		if (!stoppingOnPoller) {
			return false;
		}
		synchronized (this) {
			List<PeerConnection> list = handedOver;
			if (list == null) {
				return false;
			}
			list.add(peer);
			return true;
		}
	}

	/**
	 * After {@link #joinThread}: the peers whose close the thread handed over, for the
	 * caller to finish ({@link PeerConnection#finishClose()}); from now on a thread that
	 * outlived its join closes its peers itself.
	 */
	final synchronized List<PeerConnection> takeHandedOver() {
		List<PeerConnection> list = handedOver;
		handedOver = null;
		stoppingOnPoller = false;
		return (list != null) ? list : List.of();
	}

	/** Waits for the thread to end, up to half the time left until {@code deadline}. */
	final void joinThread(long deadline) {
		Thread t = thread;
		if (t != null) {
			try {
				t.join(Math.max(1, (deadline - System.nanoTime()) / 2_000_000));
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}
	}

	/**
	 * A peer connection for {@code id}, whose device must be that of the completion
	 * queues (an address of another device's netdev cannot use them).
	 */
	PeerConnection newPeer(ConnectionId id) {
		String device = id.deviceName();
		String expected = sendCq.context().deviceName();
		if (device != null && !device.equals(expected)) {
			throw new AttemptFailedException("DEVICE_MISMATCH",
					"rdma.connections." + name() + ": " + describeAddress() + " is on RDMA device " + device
							+ ", but queues '" + settings.sendQueue() + "' and '" + settings.receiveQueue()
							+ "' are on " + expected + ": configure them on " + device);
		}
		return newPeer(new PeerLink.Cm(id));
	}

	/** A peer connection whose QP is connected through {@code link}. */
	PeerConnection newPeer(PeerLink link) {
		ProtectionDomain p = pd;
		if (p == null) {
			throw new IllegalStateException("connection '" + name() + "' is not started");
		}
		PeerConnection peer = new PeerConnection(settings, counters, link, p, sendCq, receiveCq, listener.get(),
				routers, this::handOver, sharedReceives());
		peer.onDisconnect(() -> peerDisconnectRequested(peer));
		return peer;
	}

	abstract String describeAddress();

	/**
	 * The shared receive queue the peers' QPs are created on, or null (a client, or a
	 * server without {@code shared-receive-queue}).
	 */
	@Nullable SharedReceives sharedReceives() {
		return null;
	}

	/** The routers of the connection's queues. */
	final List<CompletionRouter> routers() {
		return routers;
	}

	/**
	 * The next event of {@code id} that is one of {@code wanted}, by {@code deadline}; an
	 * error event, a DISCONNECTED, the deadline or a wake-up throws
	 * {@link AttemptFailedException}.
	 */
	static CmEvent expect(ConnectionId id, String verb, long deadline, CmEventType... wanted) {
		while (true) {
			long left = deadline - System.nanoTime();
			if (left <= 0) {
				throw new AttemptFailedException("TIMEOUT", verb + ": no " + List.of(wanted) + " in time");
			}
			CmEvent e;
			try {
				e = id.getEvent(Duration.ofNanos(left));
			}
			catch (IllegalStateException closed) {
				throw new AttemptFailedException("CLOSED", verb + ": " + closed.getMessage(), closed);
			}
			if (e == null) {
				if (System.nanoTime() - deadline >= 0) {
					throw new AttemptFailedException("TIMEOUT", verb + ": no " + List.of(wanted) + " in time");
				}
				throw new AttemptFailedException("STOPPED", verb + ": woken up (stopping)");
			}
			for (CmEventType w : wanted) {
				if (e.type() == w) {
					return e;
				}
			}
			if (e.type() != CmEventType.ADDR_CHANGE && e.type() != CmEventType.TIMEWAIT_EXIT) {
				throw new AttemptFailedException(e.type().name(), verb + ": " + e.text() + ", " + e.statusText());
			}
		}
	}

	/** The peer disconnected: QP to error and the DREP its rdma_disconnect waits for. */
	static void answerDisconnect(PeerConnection peer) {
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

	/** The time left until {@code deadline}, at least a millisecond. */
	static Duration remaining(long deadline) {
		return Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
	}

	static String kindOf(RuntimeException ex) {
		if (ex instanceof AttemptFailedException a) {
			return a.kind();
		}
		if (ex instanceof RdmaException) {
			return "VERB_ERROR";
		}
		return "ERROR";
	}

	ConnectionNotEstablishedException notEstablished() {
		return new ConnectionNotEstablishedException(
				"connection '" + name() + "' (" + describeAddress() + ") is " + state() + ": nothing was sent");
	}

	/**
	 * The peer a send of this bean goes to (and its one-sided operations, its
	 * {@code localRegion} and {@code remoteRegionSize}): a client's current connection, a
	 * server's only peer.
	 * @throws ConnectionNotEstablishedException when there is none
	 */
	abstract PeerConnection sendTarget();

	@Override
	public final void send(byte[] data, int offset, int length) {
		sendTarget().send(data, offset, length);
	}

	@Override
	public final void send(ByteBuffer data) {
		sendTarget().send(data);
	}

	@Override
	public final void send(MemorySegment data) {
		sendTarget().send(data);
	}

	@Override
	public final SendBuffer borrowSendBuffer() {
		return sendTarget().borrowSendBuffer();
	}

	@Override
	public final SendBatch newSendBatch() {
		return new PeerSendBatch(this::sendTarget, settings.sendDepth());
	}

	@Override
	public final ReadBatch newReadBatch() {
		return new PeerReadBatch(this::sendTarget, settings);
	}

	@Override
	public final ReadStream newReadStream(int window) {
		return new PeerReadStream(this::sendTarget, settings, window);
	}

	@Override
	public final MemorySegment localRegion() {
		return sendTarget().localRegion();
	}

	@Override
	public final long remoteRegionSize() {
		return sendTarget().remoteRegionSize();
	}

	@Override
	public final void write(long remoteOffset, MemorySegment data) {
		sendTarget().write(remoteOffset, data);
	}

	@Override
	public final void write(long remoteOffset, byte[] data, int offset, int length) {
		sendTarget().write(remoteOffset, data, offset, length);
	}

	@Override
	public final void read(long remoteOffset, MemorySegment target) {
		sendTarget().read(remoteOffset, target);
	}

	/** Whether the health indicator reports DOWN while not established. */
	public boolean required() {
		return settings.required();
	}

	/** True when a required connection counts as up (a server: listening). */
	public abstract boolean isUp();

}
