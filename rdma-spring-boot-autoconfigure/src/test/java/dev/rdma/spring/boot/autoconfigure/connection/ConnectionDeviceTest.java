package dev.rdma.spring.boot.autoconfigure.connection;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.errors;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.exchange;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Connections of the starter across the two devices of the two-device tier: a server
 * application on rxeB and a client application on rxeA, in one JVM, configured through
 * properties only ({@link ConnectionApps}). The client starts first, with its peer
 * absent; then the server; messages go both ways (the server echoes) with their payloads
 * checked; the server is closed and started again and the client reconnects; both close
 * leaving no native object behind.
 */
@Tag(DeviceTestSupport.TAG)
class ConnectionDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	@Test
	void clientAndServerConnectedThroughPropertiesExchangeMessagesAcrossTheTwoDevices() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		ClientApp client = ClientApp.of(ConnectionApps.client(two.a(), two.b(), port));
		ConfigurableApplicationContext server = null;
		try {
			RdmaConnection link = client.link;

			// the peer is absent: the client retries, its health is DOWN
			await("failed attempts while the server is absent", () -> errors(client.meters) >= 2);
			assertThat(link.state()).isNotEqualTo(ConnectionState.ESTABLISHED);
			assertThat(client.health.health().getStatus()).isEqualTo(Status.DOWN);

			// the peer appears: the client connects, health UP
			server = ConnectionApps.server(two.b(), port);
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
			assertThat(client.health.health().getStatus()).isEqualTo(Status.UP);
			RdmaConnection serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			await("the server accepted", () -> serverLink.peers().size() == 1);

			// which devices carry the connection: the client's QP on rxeA from 10.0.0.1,
			// the server's peer on rxeB at 10.0.0.2
			assertThat(link.deviceName()).isEqualTo(two.a().device());
			assertThat(link.localAddress().getAddress().getHostAddress()).isEqualTo(two.a().ipv4());
			assertThat(link.peerAddress().getAddress().getHostAddress()).isEqualTo(two.b().ipv4());
			assertThat(serverLink.peers().get(0).deviceName()).isEqualTo(two.b().device());

			TwoDevices.Marks m0 = two.mark();
			int n = 2000;
			exchange(link, client.collector, 0, n, 64);
			exchange(link, client.collector, n, 200, 1024); // full-size messages too
			TwoDevices.Traffic a = m0.aSince();
			TwoDevices.Traffic b = m0.bSince();
			assertThat(a.sent()).as("packets sent by " + two.a()).isGreaterThanOrEqualTo(n + 200);
			assertThat(b.received()).as("packets received by " + two.b()).isGreaterThanOrEqualTo(n + 200);
			assertThat(b.sent()).as("packets sent by " + two.b()).isGreaterThanOrEqualTo(n + 200);
			assertThat(a.received()).as("packets received by " + two.a()).isGreaterThanOrEqualTo(n + 200);

			assertThat(link.statistics().messagesSent()).isEqualTo(n + 200);
			assertThat(link.statistics().messagesReceived()).isEqualTo(n + 200);
			assertThat(link.statistics().bytesSent()).isEqualTo(64L * n + 1024L * 200);
			assertThat(client.meters.get("rdma.connection.messages.received")
				.tag("connection", "link")
				.functionCounter()
				.count()).isEqualTo(n + 200);
			assertThat(serverLink.statistics().messagesReceived()).isEqualTo(n + 200);

			// the server restarts: the client sees the disconnect, retries, reconnects
			server.close();
			server = null;
			await("the client saw the server go", () -> link.state() != ConnectionState.ESTABLISHED);
			assertThat(link.statistics().connectionErrors()).containsKey("DISCONNECTED");
			server = ConnectionApps.server(two.b(), port);
			await("the client reconnected", () -> link.state() == ConnectionState.ESTABLISHED);
			assertThat(link.statistics().reconnects()).isEqualTo(1);
			assertThat(
					client.meters.get("rdma.connection.reconnects").tag("connection", "link").functionCounter().count())
				.isEqualTo(1);
			exchange(link, client.collector, n + 200, 500, 64);
			ConnectionApps.Echo echo = server.getBean(ConnectionApps.Echo.class);
			// the server counts an echo after posting it: the client may have it first
			await("the server's count of its echoes", () -> echo.echoed.get() == 500);
			assertThat(echo.seen).hasSize(500);
		}
		finally {
			if (server != null) {
				server.close();
			}
			client.close();
		}
	}

	/**
	 * A server whose queues are on rxeB but whose {@code listen} address is rxeA's: every
	 * peer would be refused (DEVICE_MISMATCH), so startup fails, naming the property and
	 * both devices, and closes what it opened.
	 */
	@Test
	void aServerListeningOnAnotherDevicesAddressFailsStartup() {
		TwoDevices two = tier.two();
		int port = tier.port();
		String listen = two.a().ipv4() + ":" + port;
		assertThatThrownBy(() -> ConnectionApps.serverListeningOn(two.b(), listen).close())
			.hasRootCauseInstanceOf(RdmaConfigurationException.class)
			.rootCause()
			.hasMessageContaining("rdma.connections." + ConnectionApps.NAME + ".listen=" + listen)
			.hasMessageContaining("is an address of RDMA device " + two.a().device())
			.hasMessageContaining("are on " + two.b().device());
	}

	/**
	 * A first contact with the server present connects at its first attempt: the server
	 * address's neighbour entry is flushed, so the kernel's address resolution misses the
	 * ARP reply's update (over the veth pair it comes before the request is queued) and
	 * resolves when the attempt's timer fires. With the connect timeout (5 s) as that
	 * timer, the first attempt failed with TIMEOUT every time; with
	 * {@code ConnectionId.RESOLVE_ATTEMPT} (2 s) it connects.
	 */
	@Test
	void aFirstContactConnectsAtTheFirstAttempt() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (ConfigurableApplicationContext server = ConnectionApps.server(two.b(), port)) {
			DeviceTestSupport.run(30, "ip", "neigh", "flush", "to", two.b().ipv4());
			long t0 = System.nanoTime();
			try (ConfigurableApplicationContext client = ConnectionApps.client(two.a(), two.b(), port)) {
				RdmaConnection link = client.getBean(ConnectionApps.NAME, RdmaConnection.class);
				await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
				long ms = (System.nanoTime() - t0) / 1_000_000;
				System.out.printf("# first contact through the starter: connected %d ms after the client started%n",
						ms);
				assertThat(link.statistics().connectionErrors()).as("failed attempts").isEmpty();
				assertThat(link.statistics().reconnects()).isZero();
				assertThat(link.deviceName()).isEqualTo(two.a().device());
				RdmaConnection serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
				await("the server accepted", () -> serverLink.peers().size() == 1);
				assertThat(serverLink.peers().get(0).deviceName()).isEqualTo(two.b().device());
			}
		}
	}

	/**
	 * The connection registry's {@code stop()} then {@code start()} on the client (what
	 * the sample's client does to disconnect and reconnect, and what
	 * {@link ConnectionState#CLOSED} documents): the connection closes (the server sees
	 * its peer go), then connects again under the same bean and carries messages again;
	 * nothing native is left behind.
	 */
	@Test
	void aClientRegistryStoppedAndStartedAgainConnectsAgain() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (AppPair apps = AppPair.start(two, port)) {
			RdmaConnection link = apps.link;
			RdmaConnection serverLink = apps.serverLink;
			ConnectionApps.Collector collector = apps.collector;
			RdmaConnectionRegistry registry = apps.client.getBean(RdmaConnectionRegistry.class);
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
			exchange(link, collector, 0, 100, 64);

			registry.stop();
			assertThat(registry.isRunning()).isFalse();
			assertThat(link.state()).isEqualTo(ConnectionState.CLOSED);
			assertThat(link.peers()).isEmpty();
			await("the server saw the client go", () -> serverLink.peers().isEmpty());

			TwoDevices.Marks m0 = two.mark();
			registry.start();
			await("the client connected again", () -> link.state() == ConnectionState.ESTABLISHED);
			await("the server accepted it again", () -> serverLink.peers().size() == 1);
			exchange(link, collector, 100, 200, 64);
			m0.assertCrossed(200);
			assertThat(link.statistics().messagesReceived()).isEqualTo(300);
			assertThat(serverLink.statistics().messagesReceived()).isEqualTo(300);
		}
	}

	/**
	 * Shutdown of either side under traffic completes within
	 * {@code rdma.shutdown-timeout} (10 s here) and loses nothing that was acknowledged
	 * as sent. "Acknowledged as sent" is a send whose completion arrived with success
	 * (the client's {@code messagesSent}): every such message reached the server's
	 * listener, the messages the server received are a gap-free prefix of what was posted
	 * (none duplicated), and every posted send came back either acknowledged or failed.
	 */
	@Test
	void shutdownOfEitherSideUnderTrafficIsBoundedAndLosesNothingAcknowledged() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		ConfigurableApplicationContext server = ConnectionApps.server(two.b(), port);
		ConfigurableApplicationContext client = ConnectionApps.client(two.a(), two.b(), port);
		try {
			RdmaConnection link = client.getBean(ConnectionApps.NAME, RdmaConnection.class);
			ConnectionApps.Collector collector = client.getBean(ConnectionApps.Collector.class);
			ConnectionApps.Echo echo = server.getBean(ConnectionApps.Echo.class);
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);

			// the server closes under traffic
			Sender sender = new Sender(link, collector);
			sender.start();
			await("traffic", () -> echo.echoed.get() > 500);
			long t0 = System.nanoTime();
			server.close();
			long serverClose = (System.nanoTime() - t0) / 1_000_000;
			server = null;
			await("the client saw the server go", () -> link.state() != ConnectionState.ESTABLISHED);
			sender.stopAndJoin();
			assertThat(serverClose).as("server close under traffic, ms").isLessThan(12_000);
			await("every posted send came back",
					() -> link.statistics().messagesSent() + link.statistics().sendErrors() == sender.posted);
			long acknowledged = link.statistics().messagesSent();
			List<Long> seen = new ArrayList<>(echo.seen);
			assertThat(acknowledged).isPositive();
			assertThat(seen.size()).as("messages delivered to the server's listener")
				.isGreaterThanOrEqualTo((int) acknowledged);
			for (int i = 0; i < seen.size(); i++) {
				assertThat(seen.get(i)).as("delivery " + i + ": in order, no gap, no duplicate").isEqualTo(i);
			}
			assertThat((long) seen.size()).isLessThanOrEqualTo(sender.posted);

			// the server is back; then the client closes under traffic
			server = ConnectionApps.server(two.b(), port);
			await("the client reconnected", () -> link.state() == ConnectionState.ESTABLISHED);
			collector.window.drainPermits();
			collector.window.release(16);
			ConnectionApps.Echo echo2 = server.getBean(ConnectionApps.Echo.class);
			Sender again = new Sender(link, collector);
			again.start();
			await("traffic again", () -> echo2.echoed.get() > 500);
			t0 = System.nanoTime();
			client.close();
			long clientClose = (System.nanoTime() - t0) / 1_000_000;
			again.stopAndJoin();
			assertThat(clientClose).as("client close under traffic, ms").isLessThan(12_000);
			RdmaConnection serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			await("the server saw the client go", () -> serverLink.peers().isEmpty());
		}
		finally {
			if (server != null) {
				server.close();
			}
			client.close();
		}
	}

	/**
	 * Sends numbered messages as fast as 16 unanswered ones allow, counting the posted
	 * ones.
	 */
	private static final class Sender extends Thread {

		private final RdmaConnection link;

		private final ConnectionApps.Collector collector;

		volatile boolean stop;

		volatile long posted;

		Sender(RdmaConnection link, ConnectionApps.Collector collector) {
			super("test-sender");
			this.link = link;
			this.collector = collector;
			collector.length = 64;
		}

		@Override
		public void run() {
			byte[] message = new byte[64];
			long seq = 0;
			while (!stop) {
				try {
					if (!collector.window.tryAcquire(20, TimeUnit.MILLISECONDS)) {
						continue;
					}
					ConnectionApps.fill(message, seq, 64);
					link.send(message);
					posted++;
					seq++;
				}
				catch (InterruptedException ex) {
					return;
				}
				catch (RuntimeException notSent) {
					// not established any more: nothing was posted
				}
			}
		}

		void stopAndJoin() throws InterruptedException {
			stop = true;
			join(10_000);
		}

	}

}
