package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.exchange;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A queue pair that goes to the error state without any rdma_cm event ends its
 * connection: the client (4096-byte buffers) sends 2048 bytes to a server whose receive
 * buffers hold 1024, so the server's receive fails (rxe: LOC_QP_OP_ERR) and its QP goes
 * to error, and the client's send fails with REM_OP_ERR. The side whose poller handles
 * its failed completion first ends the connection by that status and disconnects the
 * other (see the comment in the test: either order is right). The server must drop the
 * peer (it keeps one at most: {@code max-peers} 1), the client must reconnect, and
 * messages flow again on the new connection.
 *
 * <p>
 * The client signals one send in four ({@code signal-interval: 4}, issue 33): 64 messages
 * give exactly 16 send completions, and all 64 count as sent. The failing send is posted
 * amid others, unsignaled: the four before it count as sent, and it and every send
 * accepted after it count as lost ({@code send.errors}), exactly.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class FailedCompletionDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest(Duration.ofSeconds(60));

	@Test
	void aReceiveThatFailsEndsTheConnectionOnBothSidesAndTheClientReconnects() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (AppPair apps = AppPair.start(two, port, List.of("max-peers=1"),
				List.of("message-size=4096", "signal-interval=4", "send-depth=128"))) {
			RdmaConnection link = apps.link;
			RdmaConnection serverLink = apps.serverLink;
			ConnectionApps.Collector collector = apps.collector;
			apps.awaitConnected();
			MeterRegistry clientMeters = apps.client.getBean(MeterRegistry.class);
			exchange(link, collector, 0, 64, 64);
			await("the 64 sends counted as sent", () -> link.statistics().messagesSent() == 64);
			await("16 send completions", () -> sendCompletions(clientMeters) == 16);
			Thread.sleep(100);
			assertThat(sendCompletions(clientMeters)).as("send completions of 64 sends, one in 4 signaled")
				.isEqualTo(16);
			assertThat(link.statistics().sendErrors()).isZero();

			// four unsignaled sends, then the one too large for the server's 1024-byte
			// receive buffers, then three more: all posted before the failure comes back
			byte[] small = new byte[64];
			for (long seq = 64; seq < 68; seq++) {
				ConnectionApps.fill(small, seq, 64);
				link.send(small);
			}
			link.send(new byte[2048]);
			int acceptedAfter = 0;
			for (long seq = 68; seq < 71; seq++) {
				ConnectionApps.fill(small, seq, 64);
				try {
					link.send(small);
					acceptedAfter++;
				}
				catch (RuntimeException ex) {
					// the failure came back first: not posted, not lost
				}
			}
			int lost = 1 + acceptedAfter;
			await("the lost sends counted", () -> link.statistics().sendErrors() == lost);
			await("the four sends before the failure counted as sent", () -> link.statistics().messagesSent() == 68);
			Thread.sleep(100);
			assertThat(link.statistics().sendErrors())
				.as("lost sends (%d accepted after the failing one)", acceptedAfter)
				.isEqualTo(lost);
			assertThat(link.statistics().messagesSent()).isEqualTo(68);

			// Which of the two ends reaches the server first is a race of two pollers:
			// its
			// own failed receive (the peer ends by that status, then disconnects the
			// client), or the client's DREQ (the failed receive NAKed the client's send,
			// whose REM_OP_ERR the client's poller may handle first; the server then ends
			// the peer as DISCONNECTED and finds the failed receive while it drains).
			// Seen
			// both ways on rxe (run of 2026-11-29 02:08: DISCONNECTED 21 ms before the
			// receive's LOC_QP_OP_ERR); either way the failure ended the connection.
			await("the server dropped the peer whose receive failed",
					() -> serverLink.statistics()
						.connectionErrors()
						.keySet()
						.stream()
						.anyMatch((k) -> k.endsWith("_ERR") || k.equals("DISCONNECTED")));
			// whichever side was first, it ended by a failed completion, without an
			// rdma_cm
			// event before it
			assertThat(java.util.stream.Stream
				.concat(serverLink.statistics().connectionErrors().keySet().stream(),
						link.statistics().connectionErrors().keySet().stream())
				.anyMatch((k) -> k.endsWith("_ERR")))
				.as("one side ended by its failed completion: server %s, client %s",
						serverLink.statistics().connectionErrors(), link.statistics().connectionErrors())
				.isTrue();
			System.out
				.println("FAILED-COMPLETION the server's peer ended by " + serverLink.statistics().connectionErrors()
						+ "; the client's by " + link.statistics().connectionErrors());
			await("the client reconnected",
					() -> link.statistics().reconnects() == 1 && link.state() == ConnectionState.ESTABLISHED);
			await("the server accepted the new connection", () -> serverLink.peers().size() == 1);
			assertThat(link.statistics().connectionErrors()).as("how the client's connection ended").isNotEmpty();
			// the reconnected link crosses the two devices: the client's QP on rxeA, the
			// server's peer on rxeB, and their packet counters carry the new traffic
			assertThat(link.deviceName()).isEqualTo(two.a().device());
			assertThat(serverLink.peers().get(0).deviceName()).isEqualTo(two.b().device());
			TwoDevices.Marks m0 = two.mark();
			exchange(link, collector, 10, 10, 64);
			m0.assertCrossed(10);

			// the failed completion's status is a kind with a meter of its own
			MeterRegistry meters = apps.server.getBean(MeterRegistry.class);
			for (String kind : serverLink.statistics().connectionErrors().keySet()) {
				assertThat(meters.get("rdma.connection.errors")
					.tag("connection", ConnectionApps.NAME)
					.tag("kind", kind)
					.functionCounter()
					.count()).as(kind).isEqualTo(serverLink.statistics().connectionErrors().get(kind).doubleValue());
			}
		}
	}

	private static double sendCompletions(MeterRegistry meters) {
		return meters.get("rdma.completions").tag("queue", "tx").tag("status", "success").counter().count();
	}

}
