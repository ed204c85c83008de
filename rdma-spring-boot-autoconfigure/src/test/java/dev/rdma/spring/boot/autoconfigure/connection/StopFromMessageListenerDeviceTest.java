package dev.rdma.spring.boot.autoconfigure.connection;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.randomPort;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A server whose {@code @RdmaMessageListener} closes its own application context on the
 * first message (its router runs inside the poll of the receive queue): the close must
 * neither wait for the flushed work requests of the connection (only the current thread
 * could poll them) nor for the poller, so it ends well within the shutdown timeout (20
 * s), and once the listener returned nothing native is left open.
 */
@Tag(DeviceTestSupport.TAG)
@ExtendWith(OutputCaptureExtension.class)
class StopFromMessageListenerDeviceTest {

	/**
	 * On legacy queues, and on extended ones: there the listener runs inside an iterator
	 * batch of the receive queue, where the binding refuses to destroy the connection's
	 * QP (a provider such as mlx5 would spin on the CQ's lock), so the QP must be closed
	 * once the poll has ended.
	 */
	@ParameterizedTest(name = "{0} queues")
	@ValueSource(strings = { "legacy", "extended" })
	void aMessageListenerClosingItsContextClosesItAtOnceAndLeavesNothingOpen(String type, CapturedOutput output)
			throws Exception {
		TwoDevices two = TwoDevices.require();
		int port = randomPort();
		long baseline = NativeObjects.open();
		String[] queues = type.equals("extended") ? new String[] { "rdma.completion-queues.tx.type=extended",
				"rdma.completion-queues.tx.wc-flags=qp-num", "rdma.completion-queues.rx.type=extended",
				"rdma.completion-queues.rx.wc-flags=qp-num,byte-len" } : new String[0];
		ConfigurableApplicationContext server = ConnectionApps.closingServer(two.b(), port, queues);
		ConfigurableApplicationContext client = null;
		ConnectionApps.SelfCloser closer = server.getBean(ConnectionApps.SelfCloser.class);
		try {
			client = ConnectionApps.client(two.a(), two.b(), port);
			RdmaConnection link = client.getBean(ConnectionApps.NAME, RdmaConnection.class);
			await("the client connected", () -> link.state() == ConnectionState.ESTABLISHED);
			link.send(new byte[64]);
			assertThat(closer.closed.await(60, TimeUnit.SECONDS)).as("the listener closed the context").isTrue();
			assertThat(closer.failure.get()).as("the close from the listener").isNull();
			assertThat(closer.closeNanos).as("close from the listener (ns), shutdown-timeout 20 s")
				.isLessThan(TimeUnit.SECONDS.toNanos(5));
			assertThat(server.isActive()).isFalse();
			Thread poller = closer.thread.get();
			assertThat(poller).isNotNull();
			assertThat(poller.getName()).startsWith("rdma-poller-");
			poller.join(TimeUnit.SECONDS.toMillis(10));
			assertThat(poller.isAlive()).as("poller thread " + poller.getName() + " ended").isFalse();
		}
		finally {
			if (client != null) {
				client.close();
			}
			server.close();
		}
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
		while (NativeObjects.open() != baseline && System.nanoTime() - deadline < 0) {
			Thread.sleep(20);
		}
		assertThat(NativeObjects.open()).as("native objects open: " + NativeObjects.openByType()).isEqualTo(baseline);
		// every close of the server's shutdown went through the first time (on extended
		// queues the QP close inside the batch was refused, and the PD, queues and
		// channel
		// after it, until the context's close cleaned up behind them)
		assertThat(output.getAll()).doesNotContainPattern("of connection 'link' failed|after the poll of .* failed");
	}

}
