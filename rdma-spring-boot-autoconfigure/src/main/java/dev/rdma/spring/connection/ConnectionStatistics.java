package dev.rdma.spring.connection;

import java.util.Map;

/**
 * The counters of one configured connection (a client across its reconnects, a server
 * across all its peers) at one moment; the per-connection meters read the same counters.
 *
 * @param messagesSent sends whose completion arrived with success (acknowledged by the
 * peer's adapter: the message is in one of the peer's receive buffers)
 * @param bytesSent the bytes of those messages
 * @param messagesReceived messages received (successful receive completions)
 * @param bytesReceived the bytes of those messages
 * @param sendQueueFull sends that found every send buffer in flight (they waited, and
 * threw {@link SendQueueFullException} if none came free within the send timeout)
 * @param sendErrors sends, writes and reads whose completion failed (flushed by a
 * disconnect, retry exceeded...)
 * @param reconnects connections established after the first one (client), or peers
 * accepted after the first one (server)
 * @param connectionErrors rdma_cm error events and failed attempts, by event type
 * (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, REJECTED, CONNECT_ERROR, TIMEOUT,
 * DISCONNECTED...)
 * @param bytesWritten bytes of RDMA WRITEs into the peer's region whose completion
 * arrived with success ({@link RdmaConnection#write})
 * @param bytesRead bytes of RDMA READs from the peer's region whose completion arrived
 * with success ({@link RdmaConnection#read}); failed writes and reads count as
 * {@code sendErrors}
 * @param sendsPosted work requests posted on the send queue (sends, RDMA WRITEs and
 * READs, the close's marker), whatever their outcome
 * @param sendPosts calls of {@code ibv_post_send} (doorbells) that posted them: fewer
 * than {@code sendsPosted} when batches or sends of several threads shared a post
 * @param sendsRefused messages and RDMA operations the provider refused to post (a chain
 * refused at one element: it and the ones after it); also counted in {@code sendErrors}
 */
public record ConnectionStatistics(long messagesSent, long bytesSent, long messagesReceived, long bytesReceived,
		long sendQueueFull, long sendErrors, long reconnects, Map<String, Long> connectionErrors, long bytesWritten,
		long bytesRead, long sendsPosted, long sendPosts, long sendsRefused) {

	/** The counters without the posts (posted, posts and refused 0). */
	public ConnectionStatistics(long messagesSent, long bytesSent, long messagesReceived, long bytesReceived,
			long sendQueueFull, long sendErrors, long reconnects, Map<String, Long> connectionErrors, long bytesWritten,
			long bytesRead) {
		this(messagesSent, bytesSent, messagesReceived, bytesReceived, sendQueueFull, sendErrors, reconnects,
				connectionErrors, bytesWritten, bytesRead, 0, 0, 0);
	}

	/** The counters without one-sided operations (bytes written and read 0). */
	public ConnectionStatistics(long messagesSent, long bytesSent, long messagesReceived, long bytesReceived,
			long sendQueueFull, long sendErrors, long reconnects, Map<String, Long> connectionErrors) {
		this(messagesSent, bytesSent, messagesReceived, bytesReceived, sendQueueFull, sendErrors, reconnects,
				connectionErrors, 0, 0);
	}

}
