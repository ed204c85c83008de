package dev.rdma.spring.boot.autoconfigure.connection;

import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.connection.RdmaConnection;

/**
 * The client application of {@link ConnectionApps} with the beans a connection device
 * test looks at: its connection, health indicator, meters and the listener that checks
 * the echoes. {@code ClientApp client = ClientApp.of(ConnectionApps.client(...))}; its
 * close closes the application (idempotent, as the application's).
 */
final class ClientApp implements AutoCloseable {

	final ConfigurableApplicationContext app;

	/** The client's connection. */
	final RdmaConnection link;

	final RdmaHealthIndicator health;

	final MeterRegistry meters;

	/** The client's listener, which checks the echoes. */
	final ConnectionApps.Collector collector;

	private ClientApp(ConfigurableApplicationContext app) {
		this.app = app;
		this.link = app.getBean(ConnectionApps.NAME, RdmaConnection.class);
		this.health = app.getBean(RdmaHealthIndicator.class);
		this.meters = app.getBean(MeterRegistry.class);
		this.collector = app.getBean(ConnectionApps.Collector.class);
	}

	/**
	 * The started client application {@code app}; closes it when its beans are missing.
	 */
	static ClientApp of(ConfigurableApplicationContext app) {
		return ConnectionTestSupport.wrapOrClose(app, ClientApp::new);
	}

	@Override
	public void close() {
		app.close();
	}

}
