package dev.rdma.spring.connection.support;

import java.util.ArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.verbs.ChainPostException;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.ReceiveWorkRequest;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;

/**
 * The receive path of a {@link PeerConnection}: its registered region of
 * {@code receive-buffers} buffers of {@code message-size} bytes, one
 * {@link ReceivedMessage} and one {@link ReceiveWorkRequest} per buffer (both made once
 * and reused: no allocation per message), and the count of buffers not given back. A
 * receive completion is handed to the {@code @RdmaMessageListener} and the buffer posted
 * again when the listener returns, or, retained, when the message is released; its
 * message's state decides which thread posts it, so a buffer's work request is posted by
 * one thread at a time. A buffer given back on the poller (its listener returned) is
 * posted at the end of the poll batch, with the others of the batch, as one chain
 * ({@code ibv_post_recv} of a list, one doorbell); one released later by the application
 * is posted at once.
 *
 * <p>
 * <b>On a shared receive queue</b> (a server's {@code shared-receive-queue}) the peer has
 * no buffers of its own: the {@link SharedReceives} of its server lend the message of
 * each completion, which is delivered as this peer's (its listener, counters and
 * connection) and given back to the SRQ, even when this peer is closing: a peer leaving
 * takes no buffer with it. The count of buffers not given back then holds the messages of
 * this peer in a listener call or retained, which a close waits for.
 */
final class PeerReceives extends PeerPart {

	private final QueuePair qp;

	private final @Nullable MemoryRegion region;

	/** The server's shared receive queue, or null: this peer's own buffers. */
	private final @Nullable SharedReceives shared;

	private final ReceivedMessage[] messages;

	private final ReceiveWorkRequest[] requests;

	private final @Nullable MessageListenerBinding listener;

	/**
	 * Receive buffers not given back: posted, in their listener call, or retained by the
	 * application ({@link ReceivedMessage#retain()}) until released; a close destroys the
	 * receive region only once this is 0 (or its timeout passed).
	 */
	private final AtomicInteger outstanding = new AtomicInteger();

	/**
	 * Receives given back during the current poll batch, posted as one chain at its end
	 * (poller thread only; capacity for every buffer: never grows).
	 */
	private final ArrayList<ReceiveWorkRequest> reposts;

	/** Whether the router was told of {@link #reposts} in this batch (poller only). */
	private boolean repostsScheduled;

	/** Whether a listener failure was logged at WARN (poller thread only). */
	private boolean listenerFailureLogged;

	PeerReceives(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters, QueuePair qp,
			@Nullable MemoryRegion region, @Nullable SharedReceives shared, @Nullable MessageListenerBinding listener) {
		super(peer, settings, counters);
		this.qp = qp;
		this.region = region;
		this.shared = shared;
		this.listener = listener;
		int size = settings.messageSize();
		int buffers = (region != null) ? settings.receiveBuffers() : 0;
		this.messages = new ReceivedMessage[buffers];
		this.requests = new ReceiveWorkRequest[buffers];
		this.reposts = new ArrayList<>(buffers);
		for (int i = 0; i < buffers; i++) {
			messages[i] = new ReceivedMessage(peer, i, region.buffer().asSlice((long) i * size, size));
			requests[i] = new ReceiveWorkRequest().wrId(i).buffer(region, (long) i * size, size);
		}
	}

	/** This peer's receive buffers, null on a shared receive queue. */
	@Nullable MemoryRegion region() {
		return region;
	}

	/** Receive buffers posted, in a listener call or retained. */
	int outstanding() {
		return outstanding.get();
	}

	/** Posts every receive buffer (the QP is in INIT or later). */
	void postAll() {
		// on a shared receive queue: posted by the server when it started
		for (int i = 0; i < messages.length; i++) {
			repost(i);
		}
	}

	/**
	 * Posts receive buffer {@code index} again (after its message was handled); nothing
	 * once closing.
	 */
	void repost(int index) {
		if (peer.isClosing()) {
			return;
		}
		outstanding.incrementAndGet();
		try {
			qp.postRecv(requests[index]);
		}
		catch (RuntimeException ex) {
			outstanding.decrementAndGet();
			if (!peer.isClosing()) {
				logger.warn("Posting receive buffer " + index + " of connection '" + settings.name() + "' failed", ex);
			}
		}
	}

	/** The completion of receive buffer {@code index}, on the receive queue's poller. */
	void completed(int index, int status, WorkCompletion completion) {
		// the buffer stays outstanding (close waits for it) until its listener call
		// returned, or, retained, until its release(); a shared one is from now on
		if (shared != null) {
			outstanding.incrementAndGet();
		}
		boolean retained = false;
		try {
			retained = received(index, status, completion);
		}
		finally {
			if (!retained) {
				outstanding.decrementAndGet();
			}
		}
	}

	/**
	 * Hands the message of receive buffer {@code index} to the listener and posts the
	 * buffer again; true when the listener retained it.
	 */
	private boolean received(int index, int status, WorkCompletion completion) {
		if (status != 0) {
			if (!peer.isClosing() && status != WcStatus.WR_FLUSH_ERR.code()) {
				logger.warn("Receive on connection '" + settings.name() + "' (" + peer + ") failed: "
						+ WcStatus.of(status));
			}
			peer.completionFailed(status);
			if (shared != null) {
				shared.repost(index); // flushed or failed: the SRQ's buffer all the same
			}
			return false;
		}
		if (peer.state() == ConnectionState.CONNECTING) {
			// The peer's first message can be delivered before the thread that accepted
			// (or connected) has read ESTABLISHED: that event and the peer's first SEND
			// (rdma_client sends right after its RTU) reach this side by two paths, the
			// CM's event channel and this QP's completions, and nothing orders them. A
			// message from the peer proves both QPs are ready; a listener that answers
			// at once must be able to.
			peer.established();
		}
		int length = completion.byteLen();
		counters.messagesReceived.increment();
		counters.bytesReceived.add(length);
		ReceivedMessage message;
		if (shared != null) {
			message = shared.message(index);
			message.from(peer);
		}
		else {
			message = messages[index];
		}
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
			if (shared != null) {
				shared.giveBack(index);
			}
			else if (!peer.isClosing()) {
				// posted with the batch's others at its end: still outstanding till then
				outstanding.incrementAndGet();
				reposts.add(requests[index]);
			}
			return false;
		}
		return true;
	}

	/** True once per batch when buffers wait in {@link #reposts}. Poller. */
	boolean scheduleReposts() {
		if (shared != null) {
			return shared.scheduleReposts();
		}
		if (repostsScheduled || reposts.isEmpty()) {
			return false;
		}
		repostsScheduled = true;
		return true;
	}

	/**
	 * Posts the buffers the batch gave back as one chain (nothing once closing); those
	 * not posted no longer count as outstanding. Poller.
	 */
	void postReposts() {
		if (shared != null) {
			shared.postReposts();
			return;
		}
		repostsScheduled = false;
		int n = reposts.size();
		if (n == 0) {
			return;
		}
		try {
			if (peer.isClosing()) {
				outstanding.addAndGet(-n);
				return;
			}
			qp.postRecv(reposts); // a chain of one is the single post (the binding's)
		}
		catch (ChainPostException ex) {
			outstanding.addAndGet(-(n - Math.max(0, ex.postedCount())));
			if (!peer.isClosing()) {
				logger.warn("Posting " + n + " receive buffers of connection '" + settings.name() + "' failed", ex);
			}
		}
		catch (RuntimeException ex) {
			outstanding.addAndGet(-n);
			if (!peer.isClosing()) {
				logger.warn("Posting " + n + " receive buffers of connection '" + settings.name() + "' failed", ex);
			}
		}
		finally {
			reposts.clear();
		}
	}

	/**
	 * A retained message of receive buffer {@code index} was released: the buffer is
	 * posted again (unless closing) and no longer holds up a close.
	 */
	void released(int index) {
		try {
			if (shared != null) {
				shared.repost(index);
			}
			else {
				repost(index);
			}
		}
		finally {
			outstanding.decrementAndGet();
		}
	}

	/**
	 * Counts a listener failure; logs the first of this connection with its stack trace,
	 * later ones (and those while closing, typically a reply to a peer that is gone) at
	 * debug: a stack trace per message would slow the poller down to a crawl.
	 */
	private void listenerFailed(MessageListenerBinding l, int length, Throwable ex) {
		counters.listenerErrors.increment();
		if (!peer.isClosing() && !listenerFailureLogged) {
			listenerFailureLogged = true;
			logger.warn(l.id() + " threw for a message of " + length + " bytes on connection '" + settings.name()
					+ "'; its buffer is posted again (later failures of this connection: counted, logged at debug)",
					ex);
		}
		else if (logger.isDebugEnabled()) {
			logger.debug(l.id() + " threw for a message on connection '" + settings.name() + "': " + ex);
		}
	}

}
