package dev.rdma.spring.connection.support;

/**
 * How the queue pairs of a connection are connected
 * ({@code rdma.connections.<name>.exchange}), and how log lines and messages name it.
 */
enum Exchange {

	/** rdma_cm: the messages name nothing more. */
	RDMA_CM("", ""),

	/** The out-of-band TCP exchange. */
	OUT_OF_BAND(" (out of band)", " out of band");

	private final String qualifier;

	private final String via;

	Exchange(String qualifier, String via) {
		this.qualifier = qualifier;
		this.via = via;
	}

	/** The exchange {@code settings} ask for. */
	static Exchange of(ConnectionSettings settings) {
		return (settings.outOfBand() != null) ? OUT_OF_BAND : RDMA_CM;
	}

	/** What follows an address in messages: {@code ""} or {@code " (out of band)"}. */
	String qualifier() {
		return qualifier;
	}

	/**
	 * What follows "established" or "accepted a peer from ..." in the log: {@code ""} or
	 * {@code " out of band"}.
	 */
	String via() {
		return via;
	}

}
