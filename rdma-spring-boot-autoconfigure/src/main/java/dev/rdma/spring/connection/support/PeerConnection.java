package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.spring.connection.ReadStream;
import dev.rdma.spring.connection.SendBatch;
import dev.rdma.spring.connection.SendBuffer;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.spring.listener.PollerThreads;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.cm.ConnectionId;

/**
 * One connected queue pair: the application's RC QP on the connection's send and receive
 * completion queues, moved through its states by its rdma_cm id (or by an out-of-band
 * exchange, see {@link OutOfBandClientTransport}); a registered memory region of
 * {@code send-depth} send buffers and one of {@code receive-buffers} receive buffers,
 * each {@code message-size} bytes.
 *
 * <p>
 * <b>Work request ids.</b> A receive's wr_id is its buffer's index; a send's is its
 * buffer's index with {@link #SEND} set, so that a completion is told apart even when it
 * failed (a failed completion carries no valid opcode).
 *
 * <p>
 * <b>Parts.</b> This class is the connection's face and its life: state, failure, the
 * routing of completions by wr_id, and the close. The send path (send buffers, their pool
 * and work requests) is {@link PeerSends}, the receive path (receive buffers, messages,
 * reposting) {@link PeerReceives}, RDMA WRITE and READ {@link PeerOneSided}.
 *
 * <p>
 * <b>Threads.</b> Senders call {@link #send}; the pollers of the two queues call
 * {@link #onCompletion} (through the {@link CompletionRouter}); the thread of its
 * {@link ClientConnection} or {@link ServerConnection} connects and closes it.
 *
 * <p>
 * <b>Close</b> ({@link #close}) in the order that loses nothing and never blocks for
 * ever: no new sends, the {@link PeerLink}'s disconnect ({@code rdma_disconnect} waiting
 * for DISCONNECTED, or the out-of-band link's FIN waiting for the peer's, up to the
 * timeout), QP to the error state, wait (up to the deadline) until every posted receive
 * and send has come back through the pollers (flushed), every listener call has returned
 * and every retained message has been released, leave the routers, then destroy the link
 * (id or socket), the QP and the memory regions.
 */
public final class PeerConnection extends SettingsConnection {

	private static final Log logger = LogFactory.getLog(PeerConnection.class);

	/** Marks the wr_id of a send. */
	static final long SEND = 1L << 62;

	/** Marks, with {@link #SEND}, the wr_id of an RDMA WRITE or READ. */
	static final long ONE_SIDED = 1L << 61;

	/** Marks, with {@link #SEND} and {@link #ONE_SIDED}, the wr_id of an RDMA READ. */
	static final long READ = 1L << 60;

	private static final VarHandle STATE;

	static {
		try {
			STATE = MethodHandles.lookup().findVarHandle(PeerConnection.class, "state", ConnectionState.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final PeerLink link;

	private final QueuePair qp;

	private final int qpNum;

	private final PeerSends sends;

	private final PeerReceives receives;

	private final PeerOneSided oneSided;

	private final List<CompletionRouter> routers;

	/**
	 * Asked by a {@link #close} that runs on a thread that is not a poller, before it
	 * waits for the pollers and before it destroys the QP: true when the close is taken
	 * over (see {@link #close}).
	 */
	private final Predicate<PeerConnection> handOver;

	private final AtomicBoolean closing = new AtomicBoolean();

	private volatile ConnectionState state = ConnectionState.CONNECTING;

	private volatile boolean peerDisconnected;

	/** The application called {@link #disconnect()}: the owner's thread closes it. */
	private final AtomicBoolean disconnectRequested = new AtomicBoolean();

	/** Tells the owner about {@link #disconnect()} (set once made; never blocks). */
	private volatile @Nullable Runnable onDisconnect;

	/**
	 * The status ({@link WcStatus} name) of the first failed completion that ended this
	 * QP, or null while it lives; set once, on a poller thread.
	 */
	private volatile @Nullable String failure;

	/**
	 * Wakes the thread that waits for this connection's end (set by its owner once
	 * connected); called once, on a poller thread, when {@link #failure} is set.
	 */
	private volatile @Nullable Runnable onFailure;

	PeerConnection(ConnectionSettings settings, ConnectionCounters counters, PeerLink link, ProtectionDomain pd,
			CompletionQueue sendCq, CompletionQueue receiveCq, @Nullable MessageListenerBinding listener,
			List<CompletionRouter> routers) {
		this(settings, counters, link, pd, sendCq, receiveCq, listener, routers, (peer) -> false);
	}

	/**
	 * A peer connection whose close, on a thread that is not a poller, may be taken over:
	 * {@code handOver} is asked before the close waits for the pollers and before it
	 * destroys the QP, and when it answers true the close returns at once, leaving the
	 * rest to whoever took it over ({@link #finishClose()}).
	 */
	PeerConnection(ConnectionSettings settings, ConnectionCounters counters, PeerLink link, ProtectionDomain pd,
			CompletionQueue sendCq, CompletionQueue receiveCq, @Nullable MessageListenerBinding listener,
			List<CompletionRouter> routers, Predicate<PeerConnection> handOver) {
		this(settings, counters, link, pd, sendCq, receiveCq, listener, routers, handOver, null);
	}

	/**
	 * A peer connection as above whose QP receives from {@code shared} (a server's shared
	 * receive queue: no receive buffers of its own), or from its own receive queue when
	 * null.
	 */
	PeerConnection(ConnectionSettings settings, ConnectionCounters counters, PeerLink link, ProtectionDomain pd,
			CompletionQueue sendCq, CompletionQueue receiveCq, @Nullable MessageListenerBinding listener,
			List<CompletionRouter> routers, Predicate<PeerConnection> handOver, @Nullable SharedReceives shared) {
		super(settings, counters);
		this.link = link;
		this.routers = routers;
		this.handOver = handOver;
		int size = settings.messageSize();
		QueuePair createdQp = null;
		MemoryRegion createdSend = null;
		MemoryRegion createdReceive = null;
		MemoryRegion createdAccess = null;
		// everything that can fail happens inside: a failed attempt leaves nothing behind
		try {
			// one send slot more than send buffers: the close's marker
			// (PeerSends.postMarker)
			createdQp = pd.createQueuePair(new QueuePair.Attributes(sendCq, receiveCq, settings.sendDepth() + 1,
					settings.receiveDepth(), false)
				.withMaxInlineData(settings.dataPath().maxInlineData())
				.withSharedReceiveQueue((shared != null) ? shared.queue() : null));
			createdSend = pd.registerMemory((long) size * settings.sendDepth(),
					EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			if (shared == null) {
				createdReceive = pd.registerMemory((long) size * settings.receiveBuffers(),
						EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			}
			if (settings.remoteAccessSize() != 0) {
				createdAccess = pd.registerMemory(settings.remoteAccessSize(),
						EnumSet.of(MemoryRegion.Access.LOCAL_WRITE, MemoryRegion.Access.REMOTE_WRITE,
								MemoryRegion.Access.REMOTE_READ));
			}
			this.qpNum = createdQp.qpNum();
			this.sends = new PeerSends(this, settings, counters, createdQp, createdSend);
			this.receives = new PeerReceives(this, settings, counters, createdQp, createdReceive, shared, listener);
			this.oneSided = new PeerOneSided(this, settings, counters, sends, routers, createdAccess);
		}
		catch (RuntimeException | Error ex) {
			closeQuietly(createdAccess, ex);
			closeQuietly(createdReceive, ex);
			closeQuietly(createdSend, ex);
			closeQuietly(createdQp, ex);
			throw ex;
		}
		this.qp = createdQp;
		// in the routers before the QP can complete anything
		routers.forEach(r -> r.add(this));
	}

	private static void closeQuietly(@Nullable AutoCloseable resource, Throwable failure) {
		if (resource == null) {
			return;
		}
		try {
			resource.close();
		}
		catch (Exception ex) {
			failure.addSuppressed(ex);
		}
	}

	QueuePair queuePair() {
		return qp;
	}

	/**
	 * What connects the QP to its peer besides the QP: an rdma_cm id or a TCP connection.
	 */
	PeerLink link() {
		return link;
	}

	/** The rdma_cm id of a peer connected through rdma_cm. */
	ConnectionId connectionId() {
		if (link instanceof PeerLink.Cm cm) {
			return cm.id();
		}
		throw new IllegalStateException(this + " was connected out of band: it has no rdma_cm id");
	}

	int qpNum() {
		return qpNum;
	}

	/** Posts every receive buffer (the QP is in INIT or later). */
	void postReceives() {
		receives.postAll();
	}

	/**
	 * ESTABLISHED was read on the id (or, see {@link #onCompletion}, the peer's first
	 * message arrived): sends are accepted from now on, unless this connection is closed
	 * already.
	 */
	void established() {
		STATE.compareAndSet(this, ConnectionState.CONNECTING, ConnectionState.ESTABLISHED);
	}

	/** The peer disconnected (DISCONNECTED was read on the id). */
	void peerDisconnected() {
		peerDisconnected = true;
		STATE.compareAndSet(this, ConnectionState.ESTABLISHED, ConnectionState.DISCONNECTED);
	}

	/**
	 * {@code wakeUp} is run (once, on a poller thread; it must neither block nor throw)
	 * when a failed completion ends this connection; see {@link #failure()}.
	 */
	void onFailure(Runnable wakeUp) {
		this.onFailure = wakeUp;
	}

	/**
	 * How a failed completion ended this connection: the {@link WcStatus} name of its
	 * status (its error kind), or null while none did. A completion that fails with
	 * anything but WR_FLUSH_ERR, while this side is not closing and the peer has not
	 * disconnected, means the QP went to the error state (RETRY_EXC_ERR after the peer's
	 * host vanished, RNR_RETRY_EXC_ERR, LOC_QP_OP_ERR, ...), often without any rdma_cm
	 * event or end of the out-of-band link: the owner ends the connection as for
	 * DISCONNECTED.
	 */
	@Nullable String failure() {
		return failure;
	}

	/**
	 * A completion failed with {@code status}: the first failure that is not a flush ends
	 * this connection (on a poller thread: no allocation, no blocking).
	 */
	void completionFailed(int status) {
		if (status == WcStatus.WR_FLUSH_ERR.code() || failure != null || closing.get() || peerDisconnected) {
			return;
		}
		failure = WcStatus.of(status).name();
		STATE.compareAndSet(this, ConnectionState.ESTABLISHED, ConnectionState.DISCONNECTED);
		Runnable wakeUp = onFailure;
		if (wakeUp != null) {
			try {
				wakeUp.run();
			}
			catch (RuntimeException ex) {
				logger.debug("Waking up the owner of connection '" + settings.name() + "' failed: " + ex);
			}
		}
	}

	/**
	 * {@code hook} is run (on the caller's thread) by the first {@link #disconnect()}.
	 */
	void onDisconnect(Runnable hook) {
		this.onDisconnect = hook;
	}

	/**
	 * Asks the owner's thread to close this connection: from now on it reports CLOSED
	 * (sends refused, no longer among the peers); false when asked before or closing.
	 */
	boolean requestDisconnect() {
		return !closing.get() && disconnectRequested.compareAndSet(false, true);
	}

	/** True once the application asked for {@link #disconnect()}. */
	boolean disconnectRequested() {
		return disconnectRequested.get();
	}

	@Override
	public void disconnect() {
		Runnable hook = onDisconnect;
		if (requestDisconnect() && hook != null) {
			hook.run();
		}
	}

	/** True once {@link #close} began. */
	boolean isClosing() {
		return closing.get();
	}

	/** True once the peer disconnected (DISCONNECTED was read on the id). */
	boolean peerHasDisconnected() {
		return peerDisconnected;
	}

	// ------------------------------------------------------------------ completions

	/** A completion of this QP, on the poller thread of its queue. */
	void onCompletion(WorkCompletion completion) {
		long wrId = completion.wrId();
		int status = completion.statusCode();
		if ((wrId & ONE_SIDED) != 0) {
			sends.completions().completedBefore((int) (wrId & PeerOneSided.INDEX), status);
			oneSided.completed(wrId, status);
		}
		else if ((wrId & SEND) != 0) {
			sends.completions().completed((int) (wrId & ~SEND), status);
		}
		else {
			receives.completed((int) wrId, status, completion);
		}
	}

	/** Whether {@code wrId} is one of this class's receive work requests. */
	static boolean isReceive(long wrId) {
		return (wrId & (SEND | ONE_SIDED)) == 0;
	}

	/**
	 * True once per batch when receive buffers of this connection wait to be posted
	 * again: the router then calls {@link #postReposts()} at the batch's end. Poller.
	 */
	boolean scheduleReposts() {
		return receives.scheduleReposts();
	}

	/** Posts the receive buffers the batch gave back, as one chain. Poller. */
	void postReposts() {
		receives.postReposts();
	}

	/**
	 * A retained message of receive buffer {@code index} was released: the buffer is
	 * posted again (unless closing) and no longer holds up {@link #close}.
	 */
	void released(int index) {
		receives.released(index);
	}

	// ------------------------------------------------------------------ sending

	@Override
	public void send(byte[] data, int offset, int length) {
		sends.send(data, offset, length);
	}

	@Override
	public void send(ByteBuffer data) {
		sends.send(data);
	}

	@Override
	public void send(MemorySegment data) {
		sends.send(data);
	}

	@Override
	public SendBuffer borrowSendBuffer() {
		return sends.borrow();
	}

	@Override
	public SendBatch newSendBatch() {
		return new PeerSendBatch(() -> this, settings.sendDepth());
	}

	@Override
	public ReadBatch newReadBatch() {
		return new PeerReadBatch(() -> this, settings);
	}

	@Override
	public ReadStream newReadStream(int window) {
		return new PeerReadStream(() -> this, settings, window);
	}

	/** The send path (of a {@link PeerSendBatch}). */
	PeerSends sends() {
		return sends;
	}

	/** The one-sided operations (of a {@link PeerReadBatch}). */
	PeerOneSided oneSided() {
		return oneSided;
	}

	/** The exception of a send, write or read on a connection that is not established. */
	ConnectionNotEstablishedException notEstablished() {
		return new ConnectionNotEstablishedException(
				"connection '" + settings.name() + "' to " + peerAddress() + " is " + state + ": nothing was sent");
	}

	// ------------------------------------------------------------------ closing

	/**
	 * Closes this connection as the class comment says, within {@code timeout}; true when
	 * every work request came back before the deadline.
	 *
	 * <p>
	 * <b>Taken over.</b> On a thread that is not a poller, the close asks its
	 * {@code handOver} before it waits for the pollers and again before it destroys the
	 * QP. A stop that runs on a poller thread (a listener closing the context) and waits
	 * for the connection's own thread takes over the closes of that thread: the poller it
	 * waits on may be the very thread that must deliver the flushed work requests, return
	 * from the listener call this close waits for, or end the batch an
	 * {@code ibv_destroy_qp} waits for. This close then returns false at once, and the
	 * stopper calls {@link #finishClose()} once the thread ended.
	 */
	boolean close(Duration timeout, ConnectionState finalState) {
		if (!closing.compareAndSet(false, true)) {
			return true;
		}
		long deadline = Deadlines.after(timeout);
		boolean wasEstablished = STATE.getAndSet(this, finalState) == ConnectionState.ESTABLISHED;
		sends.pool().close();
		if (wasEstablished && !peerDisconnected) {
			try {
				link.disconnect(Duration.ofNanos(Math.max(1_000_000, (deadline - System.nanoTime()) / 2)));
			}
			catch (RuntimeException ex) {
				logger.debug("The disconnect of connection '" + settings.name() + "' ended: " + ex.getMessage());
			}
		}
		try {
			qp.moveToError();
			// unsignaled sends that completed have no completion of their own: the
			// marker's flushed completion gives their buffers back
			sends.postMarker();
		}
		catch (RuntimeException ex) {
			logger.debug("QP of connection '" + settings.name() + "' to error: " + ex.getMessage());
		}
		// the flushed work requests come back through the pollers, which must be running;
		// on a poller thread (a listener closing the context) they cannot: this thread
		// polls (some of) them, and it is here. Then the connection closes at once, as
		// after a timeout (late completions match no connection of the routers).
		boolean onPoller = PollerThreads.isPollerThread();
		boolean drained = !onPoller || (receives.outstanding() == 0 && sends.inFlight() == 0);
		long nextKick = System.nanoTime() + 100_000_000L;
		while (!onPoller && (receives.outstanding() > 0 || sends.inFlight() > 0)) {
			if (handOver.test(this)) {
				return false; // the stopper, on a poller thread, finishes the close
			}
			if (System.nanoTime() - nextKick >= 0) {
				// rxe flushes a receive posted to a QP already in ERR only when the
				// kernel
				// touches the QP again (docs/reliability.md): a poller's re-post racing
				// with the move above would otherwise stay posted until the QP is gone
				nextKick = System.nanoTime() + 100_000_000L;
				try {
					qp.moveToError();
				}
				catch (RuntimeException ignored) {
					// closed meanwhile
				}
			}
			if (System.nanoTime() - deadline >= 0) {
				drained = false;
				logger.warn("Connection '" + settings.name() + "' closes with " + receives.outstanding()
						+ " receives (posted, in a listener call, or retained and not released) and " + sends.inFlight()
						+ " sends not flushed back within the timeout (are the pollers of queues '"
						+ settings.sendQueue() + "' and '" + settings.receiveQueue() + "' running?)");
				break;
			}
			LockSupport.parkNanos(200_000);
		}
		if (!onPoller && handOver.test(this)) {
			return drained; // the stopper destroys the QP once its poll has ended
		}
		finishClose();
		return drained;
	}

	/**
	 * The end of {@link #close}: leave the routers, destroy the link (id or socket), the
	 * QP and the memory regions (on a poller thread once its poll has ended). Called by
	 * {@link #close}, or by the stopper that took a close over, once.
	 */
	void finishClose() {
		routers.forEach(r -> r.remove(this));
		link.close();
		closeQuietly(qp);
		closeQuietly(sends.region());
		MemoryRegion receiveRegion = receives.region();
		if (receiveRegion != null) {
			closeQuietly(receiveRegion);
		}
		MemoryRegion accessRegion = oneSided.accessRegion();
		if (accessRegion != null) {
			closeQuietly(accessRegion);
		}
	}

	/**
	 * Closes {@code closeable}, logging a failure; on a poller thread (a listener closing
	 * the connection or the context) once its poll has ended: inside an extended queue's
	 * iterator batch the binding refuses to destroy a QP of that queue (mlx5 would spin
	 * on the queue's lock), and what follows the QP must follow it.
	 */
	private void closeQuietly(AutoCloseable closeable) {
		closeQuietly(closeable, settings.name());
	}

	/**
	 * {@link #closeQuietly(AutoCloseable)} for anything of connection {@code name}
	 * ({@link SharedReceives} too).
	 */
	static void closeQuietly(AutoCloseable closeable, String name) {
		if (PollerThreads.closeWhenPollEnds(closeable)) {
			return;
		}
		try {
			closeable.close();
		}
		catch (Exception ex) {
			logger.warn("Closing " + closeable + " of connection '" + name + "' failed", ex);
		}
	}

	// ------------------------------------------------------------------ RdmaConnection

	@Override
	public ConnectionState state() {
		ConnectionState now = state;
		return (now == ConnectionState.ESTABLISHED && disconnectRequested.get()) ? ConnectionState.CLOSED : now;
	}

	@Override
	public @Nullable String deviceName() {
		return qp.protectionDomain().context().deviceName();
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		return link.peerAddress();
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		return link.localAddress();
	}

	@Override
	public List<RdmaConnection> peers() {
		return state() == ConnectionState.ESTABLISHED ? List.of(this) : List.of();
	}

	// ------------------------------------------------------------------ one-sided

	/**
	 * The private data of this side's rdma_connect or rdma_accept: the record of its
	 * region, or nothing.
	 */
	byte[] privateData() {
		return oneSided.privateData();
	}

	/**
	 * The peer's region, parsed from the private data of its connect request or accept
	 * (before this connection is established); null when it sent none.
	 */
	void remoteRegion(@Nullable RemoteRegion region) {
		oneSided.remoteRegion(region);
	}

	/** The peer's region, or null. */
	@Nullable RemoteRegion remoteRegion() {
		return oneSided.remoteRegion();
	}

	@Override
	public MemorySegment localRegion() {
		return oneSided.localRegion();
	}

	@Override
	public long remoteRegionSize() {
		return oneSided.remoteRegionSize();
	}

	@Override
	public void write(long remoteOffset, MemorySegment data) {
		oneSided.write(remoteOffset, data);
	}

	@Override
	public void write(long remoteOffset, byte[] data, int offset, int length) {
		oneSided.write(remoteOffset, data, offset, length);
	}

	@Override
	public void read(long remoteOffset, MemorySegment target) {
		oneSided.read(remoteOffset, target);
	}

	@Override
	public String toString() {
		return "PeerConnection[" + settings.name() + ", qp " + qpNum + ", " + state + "]";
	}

}
