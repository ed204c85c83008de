package dev.rdma.verbs;

/**
 * An asynchronous event of a device context ({@code struct ibv_async_event}), copied out
 * of native memory and already acknowledged ({@code ibv_ack_async_event}) when the caller
 * sees it.
 *
 * @param type the event type
 * @param code the raw {@code ibv_event_type}
 * @param description {@code ibv_event_type_str}
 * @param completionQueue the CQ of a {@link AsyncEventType#CQ_ERR}, when this binding
 * created it, else null
 * @param queuePair the QP of a QP event, when this binding created it, else null
 * @param elementAddress the native address of the CQ/QP/SRQ/WQ the event is about, 0 for
 * port and device events
 * @param portNumber the port of a port event, else 0
 * @param sharedReceiveQueue the SRQ of an {@link AsyncEventType#SRQ_LIMIT_REACHED} or
 * {@link AsyncEventType#SRQ_ERR}, when this binding created it, else null
 */
public record AsyncEvent(AsyncEventType type, int code, String description, CompletionQueue completionQueue,
		QueuePair queuePair, long elementAddress, int portNumber, SharedReceiveQueue sharedReceiveQueue) {

	/** An event about no shared receive queue. */
	public AsyncEvent(AsyncEventType type, int code, String description, CompletionQueue completionQueue,
			QueuePair queuePair, long elementAddress, int portNumber) {
		this(type, code, description, completionQueue, queuePair, elementAddress, portNumber, null);
	}

}
