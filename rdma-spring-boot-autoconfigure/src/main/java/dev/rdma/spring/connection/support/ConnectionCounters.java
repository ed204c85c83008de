package dev.rdma.spring.connection.support;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent.Reason;

/**
 * The counters of one configured connection, shared by every {@link PeerConnection} it
 * had (reconnects, a server's peers). Message counters are updated by the pollers of the
 * connection's queues, once per completion, without allocating; the meters read them.
 */
public final class ConnectionCounters {

	final LongAdder messagesSent = new LongAdder();

	final LongAdder bytesSent = new LongAdder();

	final LongAdder messagesReceived = new LongAdder();

	final LongAdder bytesReceived = new LongAdder();

	final LongAdder sendQueueFull = new LongAdder();

	final LongAdder sendErrors = new LongAdder();

	final LongAdder listenerErrors = new LongAdder();

	final LongAdder bytesWritten = new LongAdder();

	final LongAdder bytesRead = new LongAdder();

	final LongAdder sendsPosted = new LongAdder();

	final LongAdder sendPosts = new LongAdder();

	final LongAdder sendsRefused = new LongAdder();

	final AtomicLong established = new AtomicLong();

	private final LongAdder[] rejected = new LongAdder[Reason.values().length];

	{
		for (int i = 0; i < rejected.length; i++) {
			rejected[i] = new LongAdder();
		}
	}

	private final Map<String, AtomicLong> connectionErrors = new ConcurrentHashMap<>();

	/** Told each kind of connection error when it is first counted (the meters). */
	private volatile @Nullable Consumer<String> newErrorKind;

	/**
	 * Counts a connection error of {@code kind}: a connection's end or a failed attempt
	 * (never per message); allocates only for a kind counted for the first time.
	 */
	void connectionError(String kind) {
		AtomicLong n = connectionErrors.get(kind);
		if (n == null) {
			AtomicLong created = new AtomicLong();
			n = connectionErrors.putIfAbsent(kind, created);
			if (n == null) {
				n = created;
				Consumer<String> listener = newErrorKind;
				if (listener != null) {
					listener.accept(kind);
				}
			}
		}
		n.incrementAndGet();
	}

	/**
	 * Calls {@code listener} with every kind of connection error counted so far, and from
	 * now on with each kind when it is first counted (a kind may be reported twice when
	 * it is first counted meanwhile). One listener; a later one replaces it.
	 */
	public void onErrorKind(Consumer<String> listener) {
		newErrorKind = listener;
		for (String kind : connectionErrors.keySet()) {
			listener.accept(kind);
		}
	}

	/** Counts a peer a server refused for {@code reason}. */
	void reject(Reason reason) {
		rejected[reason.ordinal()].increment();
	}

	/**
	 * Peers a server refused for {@code reason} ({@code rdma.connection.rejected}).
	 */
	public long rejected(Reason reason) {
		return rejected[reason.ordinal()].sum();
	}

	public long messagesSent() {
		return messagesSent.sum();
	}

	public long bytesSent() {
		return bytesSent.sum();
	}

	public long messagesReceived() {
		return messagesReceived.sum();
	}

	public long bytesReceived() {
		return bytesReceived.sum();
	}

	public long sendQueueFull() {
		return sendQueueFull.sum();
	}

	public long sendErrors() {
		return sendErrors.sum();
	}

	public long listenerErrors() {
		return listenerErrors.sum();
	}

	/** Bytes of successful RDMA WRITEs into the peer's region. */
	public long bytesWritten() {
		return bytesWritten.sum();
	}

	/** Bytes of successful RDMA READs from the peer's region. */
	public long bytesRead() {
		return bytesRead.sum();
	}

	/** Work requests posted on the send queue. */
	public long sendsPosted() {
		return sendsPosted.sum();
	}

	/** Calls of {@code ibv_post_send} (doorbells). */
	public long sendPosts() {
		return sendPosts.sum();
	}

	/** Messages and RDMA operations the provider refused to post. */
	public long sendsRefused() {
		return sendsRefused.sum();
	}

	/** Connections established after the first one. */
	public long reconnects() {
		return Math.max(0, established.get() - 1);
	}

	/** Connection errors of one kind (a CM event type, TIMEOUT, ...). */
	public long connectionErrors(String kind) {
		AtomicLong n = connectionErrors.get(kind);
		return n == null ? 0 : n.get();
	}

	/** The kinds of connection error seen so far. */
	public java.util.Set<String> connectionErrorKinds() {
		return new java.util.TreeSet<>(connectionErrors.keySet());
	}

	ConnectionStatistics snapshot() {
		Map<String, Long> errors = new TreeMap<>();
		connectionErrors.forEach((k, v) -> errors.put(k, v.get()));
		return new ConnectionStatistics(messagesSent(), bytesSent(), messagesReceived(), bytesReceived(),
				sendQueueFull(), sendErrors(), reconnects(), Map.copyOf(errors), bytesWritten(), bytesRead(),
				sendsPosted(), sendPosts(), sendsRefused());
	}

}
