package dev.rdma.spring.boot.autoconfigure.connection;

import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.verbs.testing.NoNativeLeaks.assertNativeObjectsClosed;

/**
 * The echo server of {@link ConnectionApps} alone, on device b at a random port, for a
 * device test whose client is something else (the binding driven step by step, a C
 * program): {@code try (EchoServerApp server = EchoServerApp.start(two)) { ... }}. Its
 * close checks that no native object is left open.
 */
final class EchoServerApp implements AutoCloseable {

	/** The count of open native objects before the server started. */
	private final long baseline;

	/** The port it listens on. */
	final int port;

	final ConfigurableApplicationContext app;

	/** The server's connection. */
	final RdmaConnection link;

	/** Its listener, which echoes each message. */
	final ConnectionApps.Echo echo;

	private EchoServerApp(long baseline, int port, ConfigurableApplicationContext app) {
		this.baseline = baseline;
		this.port = port;
		this.app = app;
		this.link = app.getBean(ConnectionApps.NAME, RdmaConnection.class);
		this.echo = app.getBean(ConnectionApps.Echo.class);
	}

	/** Starts the server on {@code two.b()} at a random port. */
	static EchoServerApp start(TwoDevices two) {
		long baseline = NativeObjects.open();
		int port = DeviceTestSupport.randomPort();
		return ConnectionTestSupport.wrapOrClose(ConnectionApps.server(two.b(), port),
				app -> new EchoServerApp(baseline, port, app));
	}

	/**
	 * Closes the server; then every native object opened since it started, the client's
	 * too, must be closed.
	 */
	@Override
	public void close() {
		app.close();
		assertNativeObjectsClosed(baseline, "the server and its client closed");
	}

}
