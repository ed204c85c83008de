package dev.rdma.spring.boot.autoconfigure.connection;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;

import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.expect;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.threads;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Stopping an rdma_cm server while it accepts a peer: the accept waits on the request's
 * id for ESTABLISHED (up to {@code connect-timeout}, 30 s here), and stopping must wake
 * that wait at once, not only the listening id. The client is the binding itself, driven
 * step by step: it connects and reads CONNECT_RESPONSE but never calls
 * {@code rdma_establish}, so the server never reads ESTABLISHED.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StopDuringAcceptDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest(Duration.ofSeconds(60));

	private static final Duration STEP = Duration.ofSeconds(30);

	@Test
	void stoppingTheServerEndsAnAcceptInProgressAtOnce() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (ConfigurableApplicationContext server = ConnectionApps.server(two.b(), port, "connect-timeout=30s")) {
			RdmaConnection link = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			RdmaConnectionRegistry registry = server.getBean(RdmaConnectionRegistry.class);
			try (Context ctx = Context.open(two.a().device()); EventChannel channel = EventChannel.create()) {
				CompletionQueue cq = ctx.createCompletionQueue(16, null, 0);
				ProtectionDomain pd = ctx.allocateProtectionDomain();
				QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, true));
				ConnectionId id = resolved(channel, new InetSocketAddress(InetAddress.getByName(two.a().ipv4()), 0),
						new InetSocketAddress(InetAddress.getByName(two.b().ipv4()), port));
				id.resolveRoute(STEP);
				expect(id, CmEventType.ROUTE_RESOLVED, STEP);
				id.moveQueuePair(qp, QueuePair.State.INIT);
				id.connect(qp, CmParameters.DEFAULTS, new byte[0]);
				// the server accepted (rdma_accept answered) and now waits
				// for ESTABLISHED
				expect(id, CmEventType.CONNECT_RESPONSE, STEP);
				Thread.sleep(200);
				assertThat(link.peers()).as("no peer before its RTU").isEmpty();
				assertThat(threads()).as("the accepting thread").contains("rdma-accept-" + ConnectionApps.NAME);

				long start = System.nanoTime();
				registry.stop();
				Duration took = Duration.ofNanos(System.nanoTime() - start);
				assertThat(took).as("the registry's stop during an accept").isLessThan(Duration.ofMillis(800));
				assertThat(threads()).as("threads after stop").noneMatch((name) -> name.startsWith("rdma-accept-"));
				assertThat(link.state()).isEqualTo(ConnectionState.CLOSED);
				assertThat(link.peers()).isEmpty();
				id.close();
			}
		}
	}

	/**
	 * An id whose address is resolved: as the starter's client, one resolution attempt's
	 * time per try (a first contact whose neighbour update the kernel missed resolves
	 * when its timer fires), a new id per try.
	 */
	private static ConnectionId resolved(EventChannel channel, InetSocketAddress source,
			InetSocketAddress destination) {
		long deadline = System.nanoTime() + STEP.toNanos();
		while (true) {
			ConnectionId id = channel.createId();
			id.resolveAddress(source, destination, ConnectionId.RESOLVE_ATTEMPT);
			CmEvent e = id.getEvent(ConnectionId.RESOLVE_ATTEMPT.plusSeconds(1));
			if (e != null && e.type() == CmEventType.ADDR_RESOLVED) {
				return id;
			}
			id.close();
			assertThat(System.nanoTime() - deadline).as("address resolution within %s, last event %s", STEP, e)
				.isNegative();
		}
	}

}
