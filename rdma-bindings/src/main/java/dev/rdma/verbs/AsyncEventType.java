package dev.rdma.verbs;

/**
 * {@code enum ibv_event_type}: what an asynchronous event reports and which element it is
 * about.
 */
public enum AsyncEventType {

	CQ_ERR(Element.CQ), QP_FATAL(Element.QP), QP_REQ_ERR(Element.QP), QP_ACCESS_ERR(Element.QP), COMM_EST(Element.QP),
	SQ_DRAINED(Element.QP), PATH_MIG(Element.QP), PATH_MIG_ERR(Element.QP), DEVICE_FATAL(Element.DEVICE),
	PORT_ACTIVE(Element.PORT), PORT_ERR(Element.PORT), LID_CHANGE(Element.PORT), PKEY_CHANGE(Element.PORT),
	SM_CHANGE(Element.PORT), SRQ_ERR(Element.SRQ), SRQ_LIMIT_REACHED(Element.SRQ), QP_LAST_WQE_REACHED(Element.QP),
	CLIENT_REREGISTER(Element.PORT), GID_CHANGE(Element.PORT), WQ_FATAL(Element.WQ), UNKNOWN(Element.DEVICE);

	/** Which member of {@code ibv_async_event.element} is valid. */
	public enum Element {

		CQ, QP, SRQ, WQ, PORT, DEVICE

	}

	private final Element element;

	AsyncEventType(Element element) {
		this.element = element;
	}

	public Element element() {
		return element;
	}

	static AsyncEventType of(int code) {
		return code >= 0 && code < UNKNOWN.ordinal() ? values()[code] : UNKNOWN;
	}

}
