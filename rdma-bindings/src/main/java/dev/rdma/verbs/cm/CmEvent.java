package dev.rdma.verbs.cm;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.Errno;

/**
 * One connection-manager event ({@code struct rdma_cm_event}), copied out of librdmacm's
 * memory and already acknowledged ({@code rdma_ack_cm_event}) by the time the application
 * sees it: an event can therefore never be left unacknowledged, and closing a
 * {@link ConnectionId} never waits for one. Immutable and thread-safe.
 *
 * @param type the event
 * @param status {@code event->status}: 0 on success; for the error events a negative
 * errno (e.g. -110 ETIMEDOUT), for {@link CmEventType#REJECTED} the IB CM reject reason
 * (28: rejected by the remote application, 8: no listener on that port)
 * @param text {@code rdma_event_str(event)}
 * @param id the connection id the event belongs to (for
 * {@link CmEventType#CONNECT_REQUEST}: the new id of the request)
 * @param listener for {@link CmEventType#CONNECT_REQUEST}: the listening id, else null
 * @param privateData a copy of the private data the remote side sent
 * ({@code param.conn.private_data}); the transport pads it (56 bytes of a request, 196 of
 * an accept, 148 of a reject), so applications encode their own length. Empty when none.
 * @param responderResources {@code param.conn.responder_resources}
 * @param initiatorDepth {@code param.conn.initiator_depth}
 * @param remoteQpNum {@code param.conn.qp_num}: the remote QP number, where the event
 * carries one
 */
public record CmEvent(CmEventType type, int status, String text, ConnectionId id, @Nullable ConnectionId listener,
		byte[] privateData, int responderResources, int initiatorDepth, int remoteQpNum) {

	/** IB CM reject reason: rejected by the remote consumer (rdma_reject). */
	public static final int REJECT_CONSUMER = 28;

	/** IB CM reject reason: invalid service id (nothing listens on that port). */
	public static final int REJECT_INVALID_SERVICE_ID = 8;

	/** A copy of the private data. */
	@Override
	public byte[] privateData() {
		return privateData.clone();
	}

	/** The status explained: the errno text of a negative status, the reject reason. */
	public String statusText() {
		if (status == 0) {
			return "status 0";
		}
		if (type == CmEventType.REJECTED) {
			return "reject reason " + status + switch (status) {
				case REJECT_CONSUMER -> " (consumer: rejected by the remote application)";
				case REJECT_INVALID_SERVICE_ID -> " (invalid service id: nothing listens on that port)";
				default -> "";
			};
		}
		return "status " + status + (status < 0 ? " (" + Errno.describe(-status) + ")" : "");
	}

	@Override
	public String toString() {
		return text + " (" + statusText() + ", " + privateData.length + " bytes of private data) on " + id;
	}

}
