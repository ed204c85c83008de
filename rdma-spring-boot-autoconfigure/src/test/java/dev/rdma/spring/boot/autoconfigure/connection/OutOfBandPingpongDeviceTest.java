package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NativePeer;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code rdma.connections} with {@code exchange: out-of-band} and
 * {@code out-of-band.liveness: none} against rdma-core's {@code ibv_rc_pingpong} (1,000
 * round trips of 4 KiB, its defaults: path MTU 1024, 500 receives posted, the client
 * sends first and each side alternates), in both roles across rxeA and rxeB.
 * {@code ibv_rc_pingpong} closes the exchange's TCP connection after the records: with
 * liveness {@code tcp} the link would end there, with {@code none} it lives on the QP
 * alone. After {@code ibv_rc_pingpong} exited, the starter notices the end at its next
 * send (its QP is gone: RETRY_EXC_ERR after the retry count, at most 6, of 67 ms
 * timeouts) and logs it naming the peer's address; the client then tries to reconnect,
 * the server drops the peer and accepts the next one.
 */
@Tag(DeviceTestSupport.TAG)
@ExtendWith(OutputCaptureExtension.class)
@Timeout(value = 400, unit = TimeUnit.SECONDS)
class OutOfBandPingpongDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	private static final int ITERATIONS = 1000;

	private static final int SIZE = 4096;

	private static final Duration STEP = Duration.ofSeconds(120);

	/** How long the end may take to be noticed: 7 * 67 ms on hardware, more emulated. */
	private static final long END_BOUND_MS = 15_000;

	private static final String[] NONE = { "out-of-band.liveness=none", "message-size=" + SIZE };

	@Test
	void theStarterAsClientOfTheIbvRcPingpongServer(CapturedOutput output) throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (NativePeer server = NativePeer.ibvRcPingpong(two.b(), ITERATIONS, port)) {
			NativePeer.awaitTcpListening(port, STEP);
			try (ConfigurableApplicationContext client = ConnectionApps.outOfBandClient(two.a(), two.b(), port, NONE)) {
				RdmaConnection link = client.getBean(ConnectionApps.NAME, RdmaConnection.class);
				ConnectionApps.Collector collector = client.getBean(ConnectionApps.Collector.class);
				await("connected to ibv_rc_pingpong", () -> link.state() == ConnectionState.ESTABLISHED);
				assertThat(link.deviceName()).isEqualTo(two.a().device());
				TwoDevices.Marks m0 = two.mark();
				long t0 = System.nanoTime();
				pingPong(link, collector);
				long ms = (System.nanoTime() - t0) / 1_000_000;
				server.assertExitsZero(STEP, "ibv_rc_pingpong server");
				System.out.printf(
						"OOB-PINGPONG starter client on %s, %d round trips of %d B in %d ms;"
								+ " ibv_rc_pingpong server on %s:%n%s%n",
						two.a(), ITERATIONS, SIZE, ms, two.b(), server.output());
				assertThat(server.output()).contains(ITERATIONS + " iters in")
					.contains((long) SIZE * ITERATIONS * 2 + " bytes in");
				m0.assertCrossed(ITERATIONS);
				// the last send's completion (tx) and the last echo (rx) may be polled in
				// either order
				await("the last send's completion", () -> link.statistics().messagesSent() == ITERATIONS);
				ConnectionStatistics stats = link.statistics();
				assertThat(stats.messagesSent()).isEqualTo(ITERATIONS);
				assertThat(stats.messagesReceived()).isEqualTo(ITERATIONS);
				assertThat(stats.bytesReceived()).isEqualTo((long) SIZE * ITERATIONS);
				assertThat(stats.connectionErrors()).as("the exchange's close did not end the link").isEmpty();
				assertThat(link.state()).isEqualTo(ConnectionState.ESTABLISHED);

				// ibv_rc_pingpong exited (its QP destroyed): the next send is not
				// acknowledged, fails with RETRY_EXC_ERR, and the client reconnects
				long t1 = System.nanoTime();
				link.send(new byte[SIZE]);
				await("the client noticed the end",
						() -> link.statistics().connectionErrors().containsKey("RETRY_EXC_ERR"));
				long endMs = (System.nanoTime() - t1) / 1_000_000;
				System.out.printf("OOB-PINGPONG client noticed the server's end %d ms after its send%n", endMs);
				assertThat(endMs).as("ms from the send to the link's end").isLessThan(END_BOUND_MS);
				await("the client tries to reconnect (the exchange port is closed now)",
						() -> link.statistics().connectionErrors().containsKey("UNREACHABLE"));
				assertThat(link.state()).isEqualTo(ConnectionState.CONNECTING);
				assertThat(output.getOut() + output.getErr()).contains(two.b().ipv4() + ":" + port
						+ " ended (a work request completed with RETRY_EXC_ERR); reconnecting");
			}
		}
	}

	@Test
	void theStarterAsServerOfIbvRcPingpongClients(CapturedOutput output) throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (ConfigurableApplicationContext server = ConnectionApps.outOfBandServer(two.b(), port, NONE)) {
			RdmaConnection link = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			ConnectionApps.Echo echo = server.getBean(ConnectionApps.Echo.class);
			TwoDevices.Marks m0 = two.mark();
			long t0 = System.nanoTime();
			try (NativePeer client = NativePeer.ibvRcPingpong(two.a(), ITERATIONS, port, two.b().ipv4())) {
				client.assertExitsZero(STEP, "ibv_rc_pingpong client");
				long ms = (System.nanoTime() - t0) / 1_000_000;
				System.out.printf("OOB-PINGPONG starter server on %s; ibv_rc_pingpong client on %s, %d ms:%n%s%n",
						two.b(), two.a(), ms, client.output());
				assertThat(client.output()).contains(ITERATIONS + " iters in")
					.contains((long) SIZE * ITERATIONS * 2 + " bytes in");
			}
			m0.assertCrossed(ITERATIONS);
			// the listener counts an echo after its send was posted: rc_pingpong may
			// have its last one first
			await("the listener's count of its echoes", () -> echo.echoed.get() == ITERATIONS);
			assertThat(link.statistics().messagesReceived()).isEqualTo(ITERATIONS);
			assertThat(link.statistics().bytesReceived()).isEqualTo((long) SIZE * ITERATIONS);
			// the last echo's acknowledgement may be lost: rxe completes the client's
			// receive before it sends the ACK, and the client destroys its QP at once
			// (then that send fails with RETRY_EXC_ERR, which ends the peer by itself)
			await("every echo's completion",
					() -> link.statistics().messagesSent() + link.statistics().sendErrors() == ITERATIONS);
			System.out.printf("OOB-PINGPONG server: echoes sent %d, send errors %d%n", link.statistics().messagesSent(),
					link.statistics().sendErrors());
			assertThat(link.statistics().messagesSent()).isBetween((long) ITERATIONS - 1, (long) ITERATIONS);

			// ibv_rc_pingpong exited: a send to it fails with RETRY_EXC_ERR and the
			// server drops the peer (unless the last echo's failure did already)
			long t1 = System.nanoTime();
			List<RdmaConnection> peers = link.peers();
			if (!peers.isEmpty()) {
				assertThat(link.statistics().sendErrors()).isZero();
				peers.get(0).send(new byte[SIZE]);
			}
			await("the server dropped the peer", () -> link.peers().isEmpty());
			long endMs = (System.nanoTime() - t1) / 1_000_000;
			System.out.printf("OOB-PINGPONG server dropped the peer %d ms after its send%n", endMs);
			assertThat(endMs).as("ms from the send to the peer's end").isLessThan(END_BOUND_MS);
			assertThat(link.statistics().connectionErrors()).containsKey("RETRY_EXC_ERR");
			assertThat(link.state()).isEqualTo(ConnectionState.LISTENING);
			assertThat(output.getOut() + output.getErr())
				.containsPattern("accepted a peer from /" + two.a().ipv4().replace(".", "\\.") + ":\\d+")
				.containsPattern(
						"peer " + two.a().ipv4().replace(".", "\\.") + ":\\d+ disconnected \\(RETRY_EXC_ERR\\)");

			// and accepts the next one
			TwoDevices.Marks m1 = two.mark();
			try (NativePeer next = NativePeer.ibvRcPingpong(two.a(), 100, port, two.b().ipv4())) {
				next.assertExitsZero(STEP, "the second ibv_rc_pingpong client");
				assertThat(next.output()).contains("100 iters in");
			}
			m1.assertCrossed(100);
			assertThat(link.statistics().messagesReceived()).isEqualTo(ITERATIONS + 100);
		}
	}

	/**
	 * {@link #ITERATIONS} round trips, one message at a time as {@code ibv_rc_pingpong}
	 * alternates: message {@code i} is sent once the echo of {@code i - 1} came back. The
	 * server echoes from the buffer it received into, so each echo is checked.
	 */
	private static void pingPong(RdmaConnection link, ConnectionApps.Collector collector) throws Exception {
		collector.echoes.clear();
		collector.length = SIZE;
		// a window of one: the collector's window has 16 places
		assertThat(collector.window.tryAcquire(15, 10, TimeUnit.SECONDS)).isTrue();
		try {
			byte[] message = new byte[SIZE];
			for (long seq = 0; seq < ITERATIONS; seq++) {
				assertThat(collector.window.tryAcquire(30, TimeUnit.SECONDS)).as("the echo of message " + (seq - 1))
					.isTrue();
				ConnectionApps.fill(message, seq, SIZE);
				link.send(message);
			}
			assertThat(collector.window.tryAcquire(30, TimeUnit.SECONDS)).as("the last echo").isTrue();
			collector.window.release();
		}
		finally {
			collector.window.release(15);
		}
		assertThat(collector.problems).isEmpty();
		assertThat(collector.echoes).hasSize(ITERATIONS);
	}

}
