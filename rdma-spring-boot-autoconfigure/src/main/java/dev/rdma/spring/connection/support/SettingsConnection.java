package dev.rdma.spring.connection.support;

import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;

/**
 * What a connection bean ({@link ConfiguredConnection}) and one connection to a peer
 * ({@link PeerConnection}) share: the settings of {@code rdma.connections.<name>} and the
 * counters, and the parts of {@link RdmaConnection} they answer (a peer of a server
 * shares its server's counters).
 */
abstract sealed class SettingsConnection implements RdmaConnection permits ConfiguredConnection, PeerConnection {

	final ConnectionSettings settings;

	final ConnectionCounters counters;

	SettingsConnection(ConnectionSettings settings, ConnectionCounters counters) {
		this.settings = settings;
		this.counters = counters;
	}

	@Override
	public String name() {
		return settings.name();
	}

	@Override
	public boolean isServer() {
		return settings.server();
	}

	@Override
	public int maxMessageSize() {
		return settings.messageSize();
	}

	@Override
	public ConnectionStatistics statistics() {
		return counters.snapshot();
	}

}
