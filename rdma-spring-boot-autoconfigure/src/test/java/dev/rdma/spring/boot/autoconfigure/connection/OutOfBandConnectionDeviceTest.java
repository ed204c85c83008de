package dev.rdma.spring.boot.autoconfigure.connection;

import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.errors;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.exchange;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.threads;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code rdma.connections.<name>.exchange=out-of-band} across the two devices of the
 * two-device tier: the applications of {@link ConnectionApps} (server on rxeB, client on
 * rxeA, one JVM, properties only) connect their QPs through the TCP exchange instead of
 * rdma_cm. The client starts first, with its peer absent (it retries, health DOWN); then
 * the server; messages go both ways with their payloads checked; the server is closed and
 * started again and the client reconnects (the exchange's TCP connection told it the
 * server went); the client closes and the server notices; no thread and no native object
 * is left behind.
 */
@Tag(DeviceTestSupport.TAG)
class OutOfBandConnectionDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	/**
	 * {@code out-of-band.path-mtu=512} on both ends: a 1000-byte message then takes two
	 * packets each way instead of one (rxe's active MTU, and the default, is 1024), which
	 * the devices' packet counters show against the same number of 64-byte messages.
	 */
	@Test
	void aConfiguredPathMtuIsTheSizeOfThePackets() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (AppPair apps = AppPair.startOutOfBand(two, port, List.of("out-of-band.path-mtu=512"),
				List.of("out-of-band.path-mtu=512"))) {
			RdmaConnection link = apps.link;
			ConnectionApps.Collector collector = apps.collector;
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
			int n = 500;
			TwoDevices.Marks m0 = two.mark();
			exchange(link, collector, 0, n, 64);
			TwoDevices.Marks m1 = two.mark();
			exchange(link, collector, n, n, 1000);
			long largeA = m1.aSince().sent();
			long smallA = m1.a().since(m0.a()).sent();
			long largeB = m1.bSince().sent();
			long smallB = m1.b().since(m0.b()).sent();
			// the same messages and acknowledgements, plus one packet per
			// 1000-byte message each way
			assertThat(largeA - smallA)
				.as("packets sent by " + two.a() + ": " + largeA + " for the 1000-byte messages, " + smallA
						+ " for the 64-byte ones")
				.isBetween((long) (0.9 * n), (long) (1.1 * n));
			assertThat(largeB - smallB)
				.as("packets sent by " + two.b() + ": " + largeB + " for the 1000-byte echoes, " + smallB
						+ " for the 64-byte ones")
				.isBetween((long) (0.9 * n), (long) (1.1 * n));
		}
	}

	@Test
	void outOfBandClientAndServerExchangeMessagesReconnectAndCloseAcrossTheTwoDevices() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		ClientApp client = ClientApp.of(ConnectionApps.outOfBandClient(two.a(), two.b(), port));
		ConfigurableApplicationContext server = null;
		try {
			RdmaConnection link = client.link;
			assertThat(link.getClass().getSimpleName()).isEqualTo("ClientConnection");
			assertThat(link.toString()).contains(" (out of band), ");

			// the peer is absent: the TCP connect is refused, the client retries, DOWN
			await("failed attempts while the server is absent", () -> errors(client.meters) >= 2);
			assertThat(link.state()).isNotEqualTo(ConnectionState.ESTABLISHED);
			assertThat(link.statistics().connectionErrors()).containsKey("UNREACHABLE");
			assertThat(client.health.health().getStatus()).isEqualTo(Status.DOWN);

			// the peer appears: the client connects, health UP
			server = ConnectionApps.outOfBandServer(two.b(), port);
			RdmaConnection serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			assertThat(serverLink.getClass().getSimpleName()).isEqualTo("ServerConnection");
			assertThat(serverLink.toString()).contains(" (out of band), ");
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
			assertThat(client.health.health().getStatus()).isEqualTo(Status.UP);
			await("the server accepted", () -> serverLink.peers().size() == 1);

			// the QPs are on the devices of the queues: the client's on rxeA, the
			// server's on rxeB; the addresses are those of the exchange's TCP connection
			assertThat(link.deviceName()).isEqualTo(two.a().device());
			assertThat(serverLink.deviceName()).isEqualTo(two.b().device());
			assertThat(serverLink.peers().get(0).deviceName()).isEqualTo(two.b().device());
			assertThat(link.peerAddress().getAddress().getHostAddress()).isEqualTo(two.b().ipv4());
			assertThat(link.peerAddress().getPort()).isEqualTo(port);

			TwoDevices.Marks m0 = two.mark();
			int n = 2000;
			exchange(link, client.collector, 0, n, 64);
			exchange(link, client.collector, n, 200, 1024); // full size too
			m0.assertCrossed(n + 200);
			assertThat(link.statistics().messagesSent()).isEqualTo(n + 200);
			assertThat(link.statistics().messagesReceived()).isEqualTo(n + 200);
			assertThat(link.statistics().bytesSent()).isEqualTo(64L * n + 1024L * 200);
			assertThat(serverLink.statistics().messagesReceived()).isEqualTo(n + 200);
			assertThat(serverLink.statistics().messagesSent()).isEqualTo(n + 200);

			// the server restarts: the client sees its socket end, retries, reconnects
			long t0 = System.nanoTime();
			server.close();
			long serverClose = (System.nanoTime() - t0) / 1_000_000;
			server = null;
			assertThat(serverClose).as("server close, ms (shutdown timeout 10 s)").isLessThan(12_000);
			await("the client saw the server go", () -> link.state() != ConnectionState.ESTABLISHED);
			assertThat(link.statistics().connectionErrors()).containsKey("DISCONNECTED");
			assertThat(threads()).as("threads after the server closed").doesNotContain("rdma-accept-link");
			server = ConnectionApps.outOfBandServer(two.b(), port);
			await("the client reconnected", () -> link.state() == ConnectionState.ESTABLISHED);
			assertThat(link.statistics().reconnects()).isEqualTo(1);
			TwoDevices.Marks m1 = two.mark();
			exchange(link, client.collector, n + 200, 500, 64);
			m1.assertCrossed(500);
			ConnectionApps.Echo echo = server.getBean(ConnectionApps.Echo.class);
			await("the server's count of its echoes", () -> echo.echoed.get() == 500);
			assertThat(echo.seen).hasSize(500);

			// the client closes (FIN on the exchange connection): the server notices
			RdmaConnection serverLink2 = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			assertThat(serverLink2.peers()).hasSize(1);
			t0 = System.nanoTime();
			client.close();
			long clientClose = (System.nanoTime() - t0) / 1_000_000;
			assertThat(clientClose).as("client close, ms").isLessThan(12_000);
			await("the server saw the client go", () -> serverLink2.peers().isEmpty());
			assertThat(serverLink2.statistics().connectionErrors()).containsKey("DISCONNECTED");
			assertThat(serverLink2.state()).isEqualTo(ConnectionState.LISTENING);
			assertThat(threads()).as("threads after the client closed").doesNotContain("rdma-connect-link");
		}
		finally {
			if (server != null) {
				server.close();
			}
			client.close();
		}
		assertThat(threads()).doesNotContain("rdma-connect-link", "rdma-accept-link");
	}

	/**
	 * A server with {@code max-peers: 1} turns a second client away (it closes the
	 * exchange connection at once: the client retries) and takes it once the first peer
	 * left: it keeps accepting for as long as it runs.
	 */
	@Test
	void aServerAtMaxPeersTurnsClientsAwayUntilAPeerLeaves() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		ConfigurableApplicationContext server = ConnectionApps.outOfBandServer(two.b(), port);
		ConfigurableApplicationContext first = null;
		ConfigurableApplicationContext second = null;
		try {
			RdmaConnection serverLink = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			first = ConnectionApps.outOfBandClient(two.a(), two.b(), port);
			RdmaConnection firstLink = first.getBean(ConnectionApps.NAME, RdmaConnection.class);
			await("the first client connected",
					() -> firstLink.state() == ConnectionState.ESTABLISHED && serverLink.peers().size() == 1);

			second = ConnectionApps.outOfBandClient(two.a(), two.b(), port);
			RdmaConnection secondLink = second.getBean(ConnectionApps.NAME, RdmaConnection.class);
			await("the second client turned away twice",
					() -> serverLink.statistics().connectionErrors().getOrDefault("MAX_PEERS", 0L) >= 2);
			assertThat(secondLink.state()).isNotEqualTo(ConnectionState.ESTABLISHED);
			assertThat(secondLink.statistics().connectionErrors()).containsKey("EXCHANGE");
			assertThat(serverLink.peers()).hasSize(1);

			first.close();
			first = null;
			await("the second client got in once the first left",
					() -> secondLink.state() == ConnectionState.ESTABLISHED);
			await("the server has one peer again", () -> serverLink.peers().size() == 1);
			TwoDevices.Marks m0 = two.mark();
			exchange(secondLink, second.getBean(ConnectionApps.Collector.class), 0, 300, 512);
			m0.assertCrossed(300);
		}
		finally {
			if (second != null) {
				second.close();
			}
			if (first != null) {
				first.close();
			}
			server.close();
		}
		assertThat(threads()).doesNotContain("rdma-connect-link", "rdma-accept-link");
	}

}
