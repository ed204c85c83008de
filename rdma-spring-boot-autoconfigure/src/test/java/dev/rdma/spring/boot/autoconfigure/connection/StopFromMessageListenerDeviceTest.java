package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.EventChannel;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
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

	/** Every native object the test opened closed within 10 s after it returned. */
	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest(Duration.ofSeconds(10));

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
		closeFromTheListener(type, output, null);
	}

	/**
	 * The race of a full run whose close took 10.04 s: the client's first message reaches
	 * the server's listener before the server's accepting thread has read ESTABLISHED and
	 * listed the peer. The listener's close stops the connection on the poller thread,
	 * which waits for the accepting thread (up to half the shutdown timeout); that thread
	 * finds the server stopped, does not list the peer and closes it, and must not wait
	 * for the poller in turn (the flushed receives, the listener call in progress). Not
	 * left to timing: the accepting thread is held right after it read ESTABLISHED (in
	 * the binding's debug log of the event) until the poller waits for it.
	 */
	@ParameterizedTest(name = "{0} queues")
	@ValueSource(strings = { "legacy", "extended" })
	void aMessageListenerClosingItsContextBeforeTheAcceptListedThePeerClosesItAtOnce(String type, CapturedOutput output)
			throws Exception {
		Logger events = Logger.getLogger(EventChannel.class.getName());
		Level level = events.getLevel();
		HoldAccept hold = new HoldAccept();
		events.setLevel(Level.FINE);
		events.addHandler(hold);
		try {
			closeFromTheListener(type, output, hold);
		}
		finally {
			events.removeHandler(hold);
			events.setLevel(level);
		}
		assertThat(hold.held.get()).as("the accepting thread was held after it read ESTABLISHED").isTrue();
		assertThat(hold.released).as("released once the listener's close waited for it").isTrue();
	}

	private void closeFromTheListener(String type, CapturedOutput output, @Nullable HoldAccept hold) throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		String[] queues = type.equals("extended") ? new String[] { "rdma.completion-queues.tx.type=extended",
				"rdma.completion-queues.tx.wc-flags=qp-num", "rdma.completion-queues.rx.type=extended",
				"rdma.completion-queues.rx.wc-flags=qp-num,byte-len" } : new String[0];
		ConfigurableApplicationContext server = ConnectionApps.closingServer(two.b(), port, queues);
		ConfigurableApplicationContext client = null;
		ConnectionApps.SelfCloser closer = server.getBean(ConnectionApps.SelfCloser.class);
		if (hold != null) {
			hold.closer = closer.thread;
		}
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
		tier.awaitNativeObjectsClosed("the close from the listener");
		// every close of the server's shutdown went through the first time (on extended
		// queues the QP close inside the batch was refused, and the PD, queues and
		// channel
		// after it, until the context's close cleaned up behind them)
		assertThat(output.getAll()).doesNotContainPattern("of connection 'link' failed|after the poll of .* failed");
	}

	/**
	 * Holds the server's accepting thread ({@code rdma-accept-link}) once, right after it
	 * read ESTABLISHED (the binding logs each event it reads at debug), until the thread
	 * that closes the context from the listener waits for it ({@code joinThread}), at
	 * most 30 s.
	 */
	private static final class HoldAccept extends Handler {

		private static final String ESTABLISHED = "rdma_get_cm_event: event " + CmEventType.ESTABLISHED.code() + " ";

		final AtomicBoolean held = new AtomicBoolean();

		volatile AtomicReference<@Nullable Thread> closer = new AtomicReference<>();

		volatile boolean released;

		@Override
		public void publish(LogRecord record) {
			if (!Thread.currentThread().getName().equals("rdma-accept-" + ConnectionApps.NAME)
					|| !String.valueOf(record.getMessage()).startsWith(ESTABLISHED)
					|| !held.compareAndSet(false, true)) {
				return;
			}
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
			while (System.nanoTime() - deadline < 0) {
				Thread t = closer.get();
				if (t != null && joining(t)) {
					released = true;
					return;
				}
				try {
					Thread.sleep(5);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return;
				}
			}
		}

		private static boolean joining(Thread t) {
			for (StackTraceElement frame : t.getStackTrace()) {
				if (frame.getMethodName().equals("joinThread")) {
					return true;
				}
			}
			return false;
		}

		@Override
		public void flush() {
		}

		@Override
		public void close() {
		}

	}

}
