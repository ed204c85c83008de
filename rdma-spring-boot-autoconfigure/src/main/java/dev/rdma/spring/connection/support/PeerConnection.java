package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RemoteAccessException;
import dev.rdma.spring.connection.SendQueueFullException;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.spring.listener.PollerThreads;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.ReceiveWorkRequest;
import dev.rdma.verbs.SendWorkRequest;
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
public final class PeerConnection implements RdmaConnection {

	private static final Log logger = LogFactory.getLog(PeerConnection.class);

	/** Marks the wr_id of a send. */
	static final long SEND = 1L << 62;

	/** Marks, with {@link #SEND}, the wr_id of an RDMA WRITE or READ. */
	static final long ONE_SIDED = 1L << 61;

	/** Marks, with {@link #SEND} and {@link #ONE_SIDED}, the wr_id of an RDMA READ. */
	static final long READ = 1L << 60;

	/** The bits of a wr_id that are the buffer index. */
	private static final long INDEX = (1L << 32) - 1;

	private static final VarHandle STATE;

	static {
		try {
			STATE = MethodHandles.lookup().findVarHandle(PeerConnection.class, "state", ConnectionState.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final ConnectionSettings settings;

	private final ConnectionCounters counters;

	private final PeerLink link;

	private final QueuePair qp;

	private final int qpNum;

	private final MemoryRegion sendRegion;

	private final MemoryRegion receiveRegion;

	private final MemorySegment sendBuffers;

	private final ByteBuffer sendView;

	private final SendBufferPool pool;

	private final int[] sendLengths;

	/**
	 * The work request of each send buffer, filled once (wr_id, buffer): a post sets only
	 * the length and the opcode. Used by the thread that holds the buffer's index.
	 */
	private final SendWorkRequest[] sendRequests;

	/**
	 * The work request of each receive buffer, filled once and reposted as it is: a
	 * buffer is posted by one thread at a time (its message's state decides who).
	 */
	private final ReceiveWorkRequest[] receiveRequests;

	private final ReceivedMessage[] messages;

	private final @Nullable MessageListenerBinding listener;

	private final List<CompletionRouter> routers;

	/**
	 * Asked by a {@link #close} that runs on a thread that is not a poller, before it
	 * waits for the pollers and before it destroys the QP: true when the close is taken
	 * over (see {@link #close}).
	 */
	private final Predicate<PeerConnection> handOver;

	private final long sendTimeoutNanos;

	/**
	 * Receive buffers not given back: posted, in their listener call, or retained by the
	 * application ({@link ReceivedMessage#retain()}) until released; {@link #close}
	 * destroys the receive region only once this is 0 (or its timeout passed).
	 */
	private final AtomicInteger postedReceives = new AtomicInteger();

	/** The region the peer may write and read, or null (remote-access-size 0). */
	private final @Nullable MemoryRegion accessRegion;

	/** The peer's region, from its private data; null when it exposes none. */
	private volatile @Nullable RemoteRegion remoteRegion;

	/** Per send buffer: its RDMA READ's completion, handed to the reader. */
	private final ReadCompletions reads;

	private final long readTimeoutNanos;

	private final AtomicBoolean closing = new AtomicBoolean();

	private volatile ConnectionState state = ConnectionState.CONNECTING;

	private volatile boolean peerDisconnected;

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

	/** Whether a listener failure was logged at WARN (poller thread only). */
	private boolean listenerFailureLogged;

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
		this.settings = settings;
		this.counters = counters;
		this.link = link;
		this.listener = listener;
		this.routers = routers;
		this.handOver = handOver;
		this.sendTimeoutNanos = SendBufferPool.nanos(settings.sendTimeout());
		int size = settings.messageSize();
		QueuePair createdQp = null;
		MemoryRegion createdSend = null;
		MemoryRegion createdReceive = null;
		MemoryRegion createdAccess = null;
		// everything that can fail happens inside: a failed attempt leaves nothing behind
		try {
			createdQp = pd.createQueuePair(
					new QueuePair.Attributes(sendCq, receiveCq, settings.sendDepth(), settings.receiveDepth(), false));
			createdSend = pd.registerMemory((long) size * settings.sendDepth(),
					EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			createdReceive = pd.registerMemory((long) size * settings.receiveBuffers(),
					EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			if (settings.remoteAccessSize() != 0) {
				createdAccess = pd.registerMemory(settings.remoteAccessSize(),
						EnumSet.of(MemoryRegion.Access.LOCAL_WRITE, MemoryRegion.Access.REMOTE_WRITE,
								MemoryRegion.Access.REMOTE_READ));
			}
			this.qpNum = createdQp.qpNum();
			this.sendBuffers = createdSend.buffer();
			this.sendView = sendBuffers.asByteBuffer();
			this.pool = new SendBufferPool(settings.sendDepth());
			this.sendLengths = new int[settings.sendDepth()];
			this.reads = new ReadCompletions(settings.sendDepth());
			this.readTimeoutNanos = settings.sendTimeout().isZero() ? Deadlines.nanos(settings.connectTimeout())
					: sendTimeoutNanos;
			this.messages = new ReceivedMessage[settings.receiveBuffers()];
			MemorySegment receiveBuffers = createdReceive.buffer();
			for (int i = 0; i < messages.length; i++) {
				messages[i] = new ReceivedMessage(this, i, receiveBuffers.asSlice((long) i * size, size));
			}
			this.receiveRequests = new ReceiveWorkRequest[settings.receiveBuffers()];
			for (int i = 0; i < receiveRequests.length; i++) {
				receiveRequests[i] = new ReceiveWorkRequest().wrId(i).buffer(createdReceive, (long) i * size, size);
			}
			this.sendRequests = new SendWorkRequest[settings.sendDepth()];
			for (int i = 0; i < sendRequests.length; i++) {
				sendRequests[i] = new SendWorkRequest().wrId(SEND | i).buffer(createdSend, (long) i * size, size);
			}
		}
		catch (RuntimeException | Error ex) {
			closeQuietly(createdAccess, ex);
			closeQuietly(createdReceive, ex);
			closeQuietly(createdSend, ex);
			closeQuietly(createdQp, ex);
			throw ex;
		}
		this.accessRegion = createdAccess;
		this.receiveRegion = createdReceive;
		this.qp = createdQp;
		this.sendRegion = createdSend;
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
		for (int i = 0; i < messages.length; i++) {
			repost(i);
		}
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
	private void completionFailed(int status) {
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

	// ------------------------------------------------------------------ receiving

	/**
	 * Posts receive buffer {@code index} again (after its message was handled); nothing
	 * once closing.
	 */
	void repost(int index) {
		if (closing.get()) {
			return;
		}
		postedReceives.incrementAndGet();
		try {
			qp.postRecv(receiveRequests[index]);
		}
		catch (RuntimeException ex) {
			postedReceives.decrementAndGet();
			if (!closing.get()) {
				logger.warn("Posting receive buffer " + index + " of connection '" + settings.name() + "' failed", ex);
			}
		}
	}

	/** A completion of this QP, on the poller thread of its queue. */
	void onCompletion(WorkCompletion completion) {
		long wrId = completion.wrId();
		int status = completion.statusCode();
		if ((wrId & ONE_SIDED) != 0) {
			oneSidedCompleted(wrId, status);
			return;
		}
		if ((wrId & SEND) != 0) {
			int index = (int) (wrId & ~SEND);
			if (status == 0) {
				counters.messagesSent.increment();
				counters.bytesSent.add(sendLengths[index]);
			}
			else {
				sendFailed(index, status);
			}
			pool.release(index);
			return;
		}
		int index = (int) wrId;
		// the buffer stays outstanding (close waits for it) until its listener call
		// returned, or, retained, until its release()
		boolean retained = false;
		try {
			retained = received(index, status, completion);
		}
		finally {
			if (!retained) {
				postedReceives.decrementAndGet();
			}
		}
	}

	/**
	 * Hands the message of receive buffer {@code index} to the listener and posts the
	 * buffer again; true when the listener retained it.
	 */
	private boolean received(int index, int status, WorkCompletion completion) {
		if (status != 0) {
			if (!closing.get() && status != WcStatus.WR_FLUSH_ERR.code()) {
				logger.warn("Receive on connection '" + settings.name() + "' (" + this + ") failed: "
						+ WcStatus.of(status));
			}
			completionFailed(status);
			return false;
		}
		if (state == ConnectionState.CONNECTING) {
			// The peer's first message can be delivered before the thread that accepted
			// (or connected) has read ESTABLISHED: that event and the peer's first SEND
			// (rdma_client sends right after its RTU) reach this side by two paths, the
			// CM's event channel and this QP's completions, and nothing orders them. A
			// message from the peer proves both QPs are ready; a listener that answers
			// at once must be able to.
			established();
		}
		int length = completion.byteLen();
		counters.messagesReceived.increment();
		counters.bytesReceived.add(length);
		ReceivedMessage message = messages[index];
		message.prepare(length);
		MessageListenerBinding l = listener;
		if (l != null) {
			try {
				l.invoker().invoke(message);
			}
			catch (Throwable ex) {
				listenerFailed(l, length, ex);
			}
		}
		if (message.returnAfterCall()) {
			repost(index);
			return false;
		}
		return true;
	}

	/**
	 * A retained message of receive buffer {@code index} was released: the buffer is
	 * posted again (unless closing) and no longer holds up {@link #close}.
	 */
	void released(int index) {
		try {
			repost(index);
		}
		finally {
			postedReceives.decrementAndGet();
		}
	}

	/**
	 * Counts a listener failure; logs the first of this connection with its stack trace,
	 * later ones (and those while closing, typically a reply to a peer that is gone) at
	 * debug: a stack trace per message would slow the poller down to a crawl.
	 */
	private void listenerFailed(MessageListenerBinding l, int length, Throwable ex) {
		counters.listenerErrors.increment();
		if (!closing.get() && !listenerFailureLogged) {
			listenerFailureLogged = true;
			logger.warn(l.id() + " threw for a message of " + length + " bytes on connection '" + settings.name()
					+ "'; its buffer is posted again (later failures of this connection: counted, logged at debug)",
					ex);
		}
		else if (logger.isDebugEnabled()) {
			logger.debug(l.id() + " threw for a message on connection '" + settings.name() + "': " + ex);
		}
	}

	private void sendFailed(int index, int status) {
		counters.sendErrors.increment();
		if (!closing.get() && !peerDisconnected && status != WcStatus.WR_FLUSH_ERR.code()) {
			logger.warn("Send of " + sendLengths[index] + " bytes on connection '" + settings.name() + "' (" + this
					+ ") failed: " + WcStatus.of(status));
		}
		completionFailed(status);
	}

	// ------------------------------------------------------------------ sending

	@Override
	public void send(byte[] data, int offset, int length) {
		java.util.Objects.checkFromIndexSize(offset, length, data.length);
		int index = take(length);
		MemorySegment.copy(data, offset, sendBuffers, ValueLayout.JAVA_BYTE, (long) index * settings.messageSize(),
				length);
		post(index, length);
	}

	@Override
	public void send(ByteBuffer data) {
		int length = data.remaining();
		int index = take(length);
		// an absolute bulk put: the shared view's position is never changed
		sendView.put(index * settings.messageSize(), data, data.position(), length);
		post(index, length);
	}

	@Override
	public void send(MemorySegment data) {
		if (data.byteSize() > Integer.MAX_VALUE) {
			throw new IllegalArgumentException("a " + data.byteSize() + "-byte segment is larger than a message");
		}
		int length = (int) data.byteSize();
		int index = take(length);
		MemorySegment.copy(data, 0, sendBuffers, (long) index * settings.messageSize(), length);
		post(index, length);
	}

	/** A free send buffer for {@code length} bytes, waiting up to the send timeout. */
	private int take(int length) {
		if (length > settings.messageSize()) {
			throw new IllegalArgumentException("a message of " + length + " bytes is larger than rdma.connections."
					+ settings.name() + ".message-size (" + settings.messageSize() + ")");
		}
		if (state != ConnectionState.ESTABLISHED) {
			throw notEstablished();
		}
		int index = pool.tryAcquire();
		if (index >= 0) {
			return index;
		}
		counters.sendQueueFull.increment();
		try {
			index = pool.acquire(sendTimeoutNanos);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			throw new SendQueueFullException(
					"interrupted while waiting for a send buffer of connection '" + settings.name() + "'");
		}
		if (index < 0) {
			if (state != ConnectionState.ESTABLISHED) {
				throw notEstablished();
			}
			throw new SendQueueFullException("all " + settings.sendDepth() + " send buffers of connection '"
					+ settings.name() + "' are still in flight after rdma.connections." + settings.name()
					+ ".send-timeout (" + settings.sendTimeout() + ")");
		}
		return index;
	}

	private void post(int index, int length) {
		sendLengths[index] = length;
		try {
			qp.postSend(sendRequests[index].wrId(SEND | index)
				.buffer(sendRegion, (long) index * settings.messageSize(), length)
				.opcode(QueuePair.SendOpcode.SEND));
		}
		catch (RuntimeException ex) {
			pool.release(index);
			if (state != ConnectionState.ESTABLISHED) {
				throw notEstablished();
			}
			throw ex;
		}
	}

	private ConnectionNotEstablishedException notEstablished() {
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
		pool.close();
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
		}
		catch (RuntimeException ex) {
			logger.debug("QP of connection '" + settings.name() + "' to error: " + ex.getMessage());
		}
		// the flushed work requests come back through the pollers, which must be running;
		// on a poller thread (a listener closing the context) they cannot: this thread
		// polls (some of) them, and it is here. Then the connection closes at once, as
		// after a timeout (late completions match no connection of the routers).
		boolean onPoller = PollerThreads.isPollerThread();
		boolean drained = !onPoller || (postedReceives.get() == 0 && pool.inFlight() == 0);
		long nextKick = System.nanoTime() + 100_000_000L;
		while (!onPoller && (postedReceives.get() > 0 || pool.inFlight() > 0)) {
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
				logger.warn("Connection '" + settings.name() + "' closes with " + postedReceives.get()
						+ " receives (posted, in a listener call, or retained and not released) and " + pool.inFlight()
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
		closeQuietly(sendRegion);
		closeQuietly(receiveRegion);
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
		if (PollerThreads.closeWhenPollEnds(closeable)) {
			return;
		}
		try {
			closeable.close();
		}
		catch (Exception ex) {
			logger.warn("Closing " + closeable + " of connection '" + settings.name() + "' failed", ex);
		}
	}

	// ------------------------------------------------------------------ RdmaConnection

	@Override
	public String name() {
		return settings.name();
	}

	@Override
	public ConnectionState state() {
		return state;
	}

	@Override
	public boolean isServer() {
		return settings.server();
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
		return state == ConnectionState.ESTABLISHED ? List.of(this) : List.of();
	}

	@Override
	public int maxMessageSize() {
		return settings.messageSize();
	}

	@Override
	public ConnectionStatistics statistics() {
		return counters.snapshot();
	}

	// ------------------------------------------------------------------ one-sided

	/**
	 * The private data of this side's rdma_connect or rdma_accept: the record of its
	 * region, or nothing.
	 */
	byte[] privateData() {
		MemoryRegion region = accessRegion;
		return region == null ? new byte[0]
				: new RemoteRegion(region.bufferAddress(), region.rkey(), settings.remoteAccessSize()).encode();
	}

	/**
	 * The peer's region, parsed from the private data of its connect request or accept
	 * (before this connection is established); null when it sent none.
	 */
	void remoteRegion(@Nullable RemoteRegion region) {
		this.remoteRegion = region;
		if (region != null && logger.isDebugEnabled()) {
			logger.debug("Connection '" + settings.name() + "' (" + this + "): the peer exposes " + region);
		}
	}

	/** The peer's region, or null. */
	@Nullable RemoteRegion remoteRegion() {
		return remoteRegion;
	}

	@Override
	public MemorySegment localRegion() {
		MemoryRegion region = accessRegion;
		if (region == null) {
			throw new IllegalStateException(
					"connection '" + settings.name() + "' has no region the peer can access: rdma.connections."
							+ settings.name() + ".remote-access-size is 0");
		}
		return region.buffer();
	}

	@Override
	public long remoteRegionSize() {
		RemoteRegion region = remoteRegion;
		return region == null ? 0 : region.length();
	}

	@Override
	public void write(long remoteOffset, MemorySegment data) {
		long length = data.byteSize();
		RemoteRegion region = remoteFor("write", remoteOffset, length);
		int chunk = settings.messageSize();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = take(n);
			MemorySegment.copy(data, done, sendBuffers, (long) index * chunk, n);
			postOneSided(index, n, QueuePair.SendOpcode.RDMA_WRITE, region, remoteOffset + done);
		}
	}

	@Override
	public void write(long remoteOffset, byte[] data, int offset, int length) {
		java.util.Objects.checkFromIndexSize(offset, length, data.length);
		RemoteRegion region = remoteFor("write", remoteOffset, length);
		int chunk = settings.messageSize();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = take(n);
			MemorySegment.copy(data, offset + (int) done, sendBuffers, ValueLayout.JAVA_BYTE, (long) index * chunk, n);
			postOneSided(index, n, QueuePair.SendOpcode.RDMA_WRITE, region, remoteOffset + done);
		}
	}

	@Override
	public void read(long remoteOffset, MemorySegment target) {
		if (target.isReadOnly()) {
			throw new IllegalArgumentException("the target of an RDMA READ must be writable");
		}
		long length = target.byteSize();
		RemoteRegion region = remoteFor("read", remoteOffset, length);
		Thread me = Thread.currentThread();
		for (int i = 0; i < routers.size(); i++) {
			CompletionRouter router = routers.get(i);
			if (router.queue().equals(settings.sendQueue()) && router.isPoller(me)) {
				throw new IllegalStateException("RDMA READ on connection '" + settings.name() + "' called on thread "
						+ me.getName() + ", the poller of its send queue '" + settings.sendQueue()
						+ "': it would wait for a completion only this thread delivers; read from another thread");
			}
		}
		int chunk = settings.messageSize();
		for (long done = 0; done < length; done += chunk) {
			int n = (int) Math.min(chunk, length - done);
			int index = take(n);
			reads.begin(index);
			postOneSided(index, n, QueuePair.SendOpcode.RDMA_READ, region, remoteOffset + done);
			int status = reads.await(index, readTimeoutNanos);
			if (status == ReadCompletions.ABANDONED) {
				// the buffer stays in flight: the READ's completion frees it
				boolean interrupted = me.isInterrupted();
				throw new RemoteAccessException("RDMA READ of " + n + " bytes on connection '" + settings.name() + "' "
						+ (interrupted ? "interrupted"
								: "did not complete within " + Duration.ofNanos(readTimeoutNanos)
										+ " (send-timeout, or connect-timeout when it is 0)")
						+ "; is the poller of queue '" + settings.sendQueue()
						+ "' running, and not blocked in this call? Its buffer is freed when the completion arrives");
			}
			if (status != 0) {
				pool.release(index);
				if (state != ConnectionState.ESTABLISHED) {
					throw notEstablished();
				}
				throw new RemoteAccessException("RDMA READ of " + n + " bytes at offset " + (remoteOffset + done)
						+ " of the peer's region on connection '" + settings.name() + "' failed: "
						+ WcStatus.of(status));
			}
			MemorySegment.copy(sendBuffers, (long) index * chunk, target, done, n);
			pool.release(index);
		}
	}

	/**
	 * The peer's region, once {@code length} bytes at {@code offset} are known to fit in
	 * it and the connection is established.
	 */
	private RemoteRegion remoteFor(String operation, long offset, long length) {
		if (state != ConnectionState.ESTABLISHED) {
			throw notEstablished();
		}
		RemoteRegion region = remoteRegion;
		if (region == null) {
			throw new IllegalStateException("RDMA " + operation + " on connection '" + settings.name()
					+ "': the peer exposes no region (its remote-access-size is 0, or it is not an rdma-spring-boot application)");
		}
		if (offset < 0 || length > region.length() - offset) {
			throw new IllegalArgumentException("RDMA " + operation + " of " + length + " bytes at offset " + offset
					+ " does not fit in the peer's region of " + region.length() + " bytes (connection '"
					+ settings.name() + "')");
		}
		return region;
	}

	/**
	 * Posts an RDMA WRITE or READ of send buffer {@code index}; it is released on
	 * failure.
	 */
	private void postOneSided(int index, int length, QueuePair.SendOpcode opcode, RemoteRegion region, long offset) {
		sendLengths[index] = length;
		long kind = opcode == QueuePair.SendOpcode.RDMA_READ ? SEND | ONE_SIDED | READ : SEND | ONE_SIDED;
		try {
			qp.postSend(sendRequests[index].wrId(kind | index)
				.buffer(sendRegion, (long) index * settings.messageSize(), length)
				.opcode(opcode)
				.remote(region.address() + offset, region.rkey()));
		}
		catch (RuntimeException ex) {
			if (opcode == QueuePair.SendOpcode.RDMA_READ) {
				reads.cancel(index);
			}
			pool.release(index);
			if (state != ConnectionState.ESTABLISHED) {
				throw notEstablished();
			}
			throw ex;
		}
	}

	/**
	 * The completion of an RDMA WRITE (frees its buffer) or READ (hands the status to its
	 * reader, or frees the buffer of an abandoned READ); on the send queue's poller.
	 */
	private void oneSidedCompleted(long wrId, int status) {
		int index = (int) (wrId & INDEX);
		boolean read = (wrId & READ) != 0;
		if (status == 0) {
			(read ? counters.bytesRead : counters.bytesWritten).add(sendLengths[index]);
		}
		else {
			counters.sendErrors.increment();
			if (!closing.get() && !peerDisconnected && status != WcStatus.WR_FLUSH_ERR.code()) {
				logger.warn("RDMA " + (read ? "READ" : "WRITE") + " of " + sendLengths[index] + " bytes on connection '"
						+ settings.name() + "' (" + this + ") failed: " + WcStatus.of(status));
			}
			completionFailed(status);
		}
		if (!read) {
			pool.release(index);
			return;
		}
		if (reads.complete(index, status)) {
			pool.release(index); // its reader gave up
		}
	}

	@Override
	public String toString() {
		return "PeerConnection[" + settings.name() + ", qp " + qpNum + ", " + state + "]";
	}

}
