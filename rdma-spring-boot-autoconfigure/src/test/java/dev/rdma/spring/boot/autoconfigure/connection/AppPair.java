package dev.rdma.spring.boot.autoconfigure.connection;

import java.util.List;
import java.util.function.Supplier;

import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;

/**
 * The connected pair of the connection device tests: the echo server of
 * {@link ConnectionApps} on device b and its client on device a, started in that order (a
 * client that fails to start closes the server) and closed the other way round, the
 * client first. A test writes {@code try (AppPair apps = AppPair.start(two, port)) {
 * apps.awaitConnected(); ... }}.
 */
final class AppPair implements AutoCloseable {

	final ConfigurableApplicationContext server;

	final ConfigurableApplicationContext client;

	/** The client's connection. */
	final RdmaConnection link;

	/** The server's connection. */
	final RdmaConnection serverLink;

	/** The client's listener, which checks the echoes. */
	final ConnectionApps.Collector collector;

	private AppPair(ConfigurableApplicationContext server, ConfigurableApplicationContext client) {
		this.server = server;
		this.client = client;
		this.link = client.getBean(ConnectionApps.NAME, RdmaConnection.class);
		this.serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
		this.collector = client.getBean(ConnectionApps.Collector.class);
	}

	/** Both applications with the connection properties of {@link ConnectionApps}. */
	static AppPair start(TwoDevices two, int port) {
		return start(two, port, List.of(), List.of());
	}

	/**
	 * Both applications; {@code serverMore} and {@code clientMore} are further properties
	 * of each side's connection, as for {@link ConnectionApps#server}.
	 */
	static AppPair start(TwoDevices two, int port, List<String> serverMore, List<String> clientMore) {
		return start(() -> ConnectionApps.server(two.b(), port, serverMore.toArray(String[]::new)),
				() -> ConnectionApps.client(two.a(), two.b(), port, clientMore.toArray(String[]::new)));
	}

	/**
	 * Both applications with their exchange out of band
	 * ({@link ConnectionApps#outOfBandServer}, {@link ConnectionApps#outOfBandClient}).
	 */
	static AppPair startOutOfBand(TwoDevices two, int port, List<String> serverMore, List<String> clientMore) {
		return start(() -> ConnectionApps.outOfBandServer(two.b(), port, serverMore.toArray(String[]::new)),
				() -> ConnectionApps.outOfBandClient(two.a(), two.b(), port, clientMore.toArray(String[]::new)));
	}

	private static AppPair start(Supplier<ConfigurableApplicationContext> serverApp,
			Supplier<ConfigurableApplicationContext> clientApp) {
		return ConnectionTestSupport.wrapOrClose(serverApp.get(), server -> new AppPair(server, clientApp.get()));
	}

	/** Waits until the client is connected and the server lists it as its one peer. */
	void awaitConnected() throws InterruptedException {
		await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
		await("the server accepted", () -> serverLink.peers().size() == 1);
	}

	/** Closes the client, then the server. */
	@Override
	public void close() {
		try {
			client.close();
		}
		finally {
			server.close();
		}
	}

}
