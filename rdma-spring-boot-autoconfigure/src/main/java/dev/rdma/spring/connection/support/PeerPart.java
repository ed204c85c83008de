package dev.rdma.spring.connection.support;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

/**
 * What the parts of a {@link PeerConnection} share: the connection they belong to, its
 * settings and counters, and its logger (the parts log as the connection does). The send
 * path ({@link PeerSends}), the receive path ({@link PeerReceives}) and the one-sided
 * operations ({@link PeerOneSided}) extend it.
 */
abstract class PeerPart {

	static final Log logger = LogFactory.getLog(PeerConnection.class);

	final PeerConnection peer;

	final ConnectionSettings settings;

	final ConnectionCounters counters;

	PeerPart(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters) {
		this.peer = peer;
		this.settings = settings;
		this.counters = counters;
	}

}
