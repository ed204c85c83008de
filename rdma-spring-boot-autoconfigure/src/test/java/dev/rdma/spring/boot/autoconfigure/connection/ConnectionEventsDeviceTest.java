package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.event.EventListener;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.event.RdmaConnectionAttemptFailedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEndedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEstablishedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionGaveUpEvent;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NativePeer;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.exchange;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The connection events and {@code disconnect()} across the two devices: a server that
 * speaks first to each of rdma-core's {@code ucmatose} clients from its established event
 * and ends each with {@code disconnect()}, a client that gives up, and the events of a
 * starter pair (rdma_cm, and out of band) whose peers are disconnected by either side.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ConnectionEventsDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	private static final Duration STEP = Duration.ofSeconds(90);

	/** ucmatose's connections, messages per connection each way, and message size. */
	private static final int CLIENTS = 4;

	private static final int MESSAGES = 10;

	private static final int SIZE = 100;

	@Test
	void aServerGreetsEachUcmatoseClientFromItsEstablishedEventAndDisconnectsItAfterItsReplies() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		List<String> properties = ConnectionApps.properties(two.b(), "listen=" + two.b().ipv4() + ":" + port);
		properties.add("rdma.connections." + ConnectionApps.NAME + ".max-peers=" + CLIENTS);
		try (ConfigurableApplicationContext server = ConnectionApps.start(GreetingServer.class, properties)) {
			RdmaConnection link = server.getBean(ConnectionApps.NAME, RdmaConnection.class);
			Greeter greeter = server.getBean(Greeter.class);
			TwoDevices.Marks m0 = two.mark();
			// ucmatose's client connects -c times, waits for -C messages of -S bytes on
			// each connection (the server speaks first), replies as many, then waits
			// for the server's DISCONNECTED on every connection
			try (NativePeer clients = NativePeer.start("ucmatose", "-s", two.b().ipv4(), "-b", two.a().ipv4(), "-p",
					Integer.toString(port), "-c", Integer.toString(CLIENTS), "-C", Integer.toString(MESSAGES), "-S",
					Integer.toString(SIZE))) {
				clients.assertExitsZero(STEP, "ucmatose -c " + CLIENTS);
				assertThat(clients.output()).contains("data transfers complete").contains("return status 0");
			}
			m0.assertCrossed(CLIENTS * MESSAGES);
			await("an ended event for each client", () -> greeter.ended.size() == CLIENTS);
			assertThat(greeter.problems).isEmpty();
			assertThat(greeter.greeted).hasSize(CLIENTS);
			assertThat(greeter.replies.values()).hasSize(CLIENTS).allMatch((n) -> n.get() == MESSAGES);
			for (RdmaConnectionEstablishedEvent established : greeter.greeted) {
				assertThat(established.getPeerAddress().getAddress().getHostAddress()).isEqualTo(two.a().ipv4());
				assertThat(established.getDeviceName()).isEqualTo(two.b().device());
			}
			for (RdmaConnectionEndedEvent ended : greeter.ended) {
				assertThat(ended.getCause()).as(ended.toString()).isEqualTo(RdmaConnectionEndedEvent.Cause.APPLICATION);
				assertThat(ended.getPeer().state()).isEqualTo(ConnectionState.CLOSED);
			}
			assertThat(greeter.threads).allMatch((t) -> t.equals("rdma-accept-" + ConnectionApps.NAME));
			// every peer ended by the server, none by a stop: still listening, no peer
			assertThat(link.state()).isEqualTo(ConnectionState.LISTENING);
			assertThat(link.peers()).isEmpty();
			assertThat(link.statistics().messagesSent()).isEqualTo(CLIENTS * MESSAGES);
			assertThat(link.statistics().messagesReceived()).isEqualTo(CLIENTS * MESSAGES);
			assertThat(link.statistics().connectionErrors()).doesNotContainKey("DISCONNECTED");
		}
	}

	@Test
	void aClientThatGivesUpPublishesItsFailedAttemptsAndGaveUp() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port(); // nobody listens there
		try (ConfigurableApplicationContext client = ConnectionApps.client(two.a(), two.b(), port,
				"retry.max-attempts=2")) {
			ConnectionApps.Events events = client.getBean(ConnectionApps.Events.class);
			assertThat(events.gaveUp.await(60, TimeUnit.SECONDS)).as("the application saw the client give up").isTrue();
			List<Object> all = new ArrayList<>(events.all);
			assertThat(all).hasSize(3);
			RdmaConnectionAttemptFailedEvent first = (RdmaConnectionAttemptFailedEvent) all.get(0);
			RdmaConnectionAttemptFailedEvent last = (RdmaConnectionAttemptFailedEvent) all.get(1);
			RdmaConnectionGaveUpEvent gaveUp = (RdmaConnectionGaveUpEvent) all.get(2);
			System.out.println("GAVE-UP " + first.getKind() + ": " + first.getError().getMessage());
			assertThat(first.getAttempt()).isEqualTo(1);
			assertThat(first.getNextAttemptIn()).isNotNull();
			assertThat(first.getError().getMessage()).contains(two.b().ipv4() + ":" + port);
			assertThat(last.getAttempt()).isEqualTo(2);
			assertThat(last.getNextAttemptIn()).isNull();
			assertThat(gaveUp.getAttempts()).isEqualTo(2);
			assertThat(gaveUp.getConnection().state()).isEqualTo(ConnectionState.DISCONNECTED);
			assertThat(events.threads).containsOnly("rdma-connect-" + ConnectionApps.NAME);
		}
	}

	@ParameterizedTest(name = "exchange: {0}")
	@ValueSource(strings = { "cm", "out-of-band" })
	void establishedAndEndedEventsOfAPairWhoseServerThenClientDisconnects(String exchange) throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		boolean cm = exchange.equals("cm");
		try (AppPair apps = cm ? AppPair.start(two, port) : AppPair.startOutOfBand(two, port, List.of(), List.of())) {
			ConnectionApps.Events serverEvents = apps.server.getBean(ConnectionApps.Events.class);
			ConnectionApps.Events clientEvents = apps.client.getBean(ConnectionApps.Events.class);
			RdmaConnectionEstablishedEvent accepted = serverEvents.next(RdmaConnectionEstablishedEvent.class);
			RdmaConnectionEstablishedEvent connected = clientEvents.next(RdmaConnectionEstablishedEvent.class);
			apps.awaitConnected();
			assertThat(accepted.getConnection()).isSameAs(apps.serverLink);
			assertThat(accepted.getPeer()).isSameAs(apps.serverLink.peers().get(0));
			assertThat(accepted.getPeerAddress()).isNotNull();
			if (cm) { // out of band, the exchange's TCP source address is the kernel's
						// choice
				assertThat(accepted.getPeerAddress().getAddress().getHostAddress()).isEqualTo(two.a().ipv4());
			}
			assertThat(accepted.getDeviceName()).isEqualTo(two.b().device());
			assertThat(connected.getConnection()).isSameAs(apps.link);
			assertThat(connected.getPeerAddress().getAddress().getHostAddress()).isEqualTo(two.b().ipv4());
			assertThat(connected.getPeerAddress().getPort()).isEqualTo(port);
			assertThat(connected.getDeviceName()).isEqualTo(two.a().device());
			exchange(apps.link, apps.collector, 0, 20, 64);

			// the server ends its peer: the client sees DISCONNECTED and reconnects
			accepted.getPeer().disconnect();
			RdmaConnectionEndedEvent serverEnded = serverEvents.next(RdmaConnectionEndedEvent.class);
			assertThat(serverEnded.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.APPLICATION);
			assertThat(serverEnded.getPeer()).isSameAs(accepted.getPeer());
			assertThat(serverEnded.getPeerAddress()).isEqualTo(accepted.getPeerAddress());
			RdmaConnectionEndedEvent clientEnded = clientEvents.next(RdmaConnectionEndedEvent.class);
			assertThat(clientEnded.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.DISCONNECTED);
			assertThat(clientEnded.getDetail()).isEqualTo("DISCONNECTED");
			assertThat(clientEnded.getPeer()).isSameAs(connected.getPeer());
			RdmaConnectionEstablishedEvent reconnected = clientEvents.next(RdmaConnectionEstablishedEvent.class);
			RdmaConnectionEstablishedEvent acceptedAgain = serverEvents.next(RdmaConnectionEstablishedEvent.class);
			assertThat(reconnected.getPeer()).isNotSameAs(connected.getPeer());
			apps.awaitConnected();
			exchange(apps.link, apps.collector, 20, 20, 64);

			// the client ends its connection: no reconnect until started again
			apps.link.disconnect();
			RdmaConnectionEndedEvent clientClosed = clientEvents.next(RdmaConnectionEndedEvent.class);
			assertThat(clientClosed.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.APPLICATION);
			assertThat(clientClosed.getPeer()).isSameAs(reconnected.getPeer());
			RdmaConnectionEndedEvent serverSaw = serverEvents.next(RdmaConnectionEndedEvent.class);
			assertThat(serverSaw.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.DISCONNECTED);
			assertThat(serverSaw.getPeer()).isSameAs(acceptedAgain.getPeer());
			await("the server dropped the peer", () -> apps.serverLink.peers().isEmpty());
			assertThat(apps.link.state()).isEqualTo(ConnectionState.DISCONNECTED);
			Thread.sleep(500);
			assertThat(apps.link.state()).as("no reconnect").isEqualTo(ConnectionState.DISCONNECTED);
			assertThat(clientEvents.all).as("nothing after the client's disconnect").isEmpty();
			assertThat(serverEvents.threads).containsOnly("rdma-accept-" + ConnectionApps.NAME);
			assertThat(clientEvents.threads).containsOnly("rdma-connect-" + ConnectionApps.NAME);
		}
	}

	/** The server that speaks first: {@link Greeter}. */
	@Configuration(proxyBeanMethods = false)
	static class GreetingServer extends ConnectionApps.Common {

		@Bean
		Greeter greeter() {
			return new Greeter();
		}

	}

	/**
	 * Sends {@link #MESSAGES} messages of {@link #SIZE} bytes to each new peer from the
	 * established event, counts the peer's replies, and disconnects the peer from its
	 * message listener (on the poller thread) once all came.
	 */
	static class Greeter {

		final ConcurrentLinkedQueue<RdmaConnectionEstablishedEvent> greeted = new ConcurrentLinkedQueue<>();

		final ConcurrentLinkedQueue<RdmaConnectionEndedEvent> ended = new ConcurrentLinkedQueue<>();

		final Map<RdmaConnection, AtomicInteger> replies = new ConcurrentHashMap<>();

		final ConcurrentLinkedQueue<String> threads = new ConcurrentLinkedQueue<>();

		final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();

		private final byte[] hello = new byte[SIZE];

		@EventListener
		void greet(RdmaConnectionEstablishedEvent event) {
			threads.add(Thread.currentThread().getName());
			for (int i = 0; i < MESSAGES; i++) {
				event.getPeer().send(hello);
			}
			greeted.add(event);
		}

		@EventListener
		void ended(RdmaConnectionEndedEvent event) {
			threads.add(Thread.currentThread().getName());
			ended.add(event);
		}

		@RdmaMessageListener(connection = ConnectionApps.NAME)
		void onReply(RdmaMessage message) {
			if (message.length() != SIZE) {
				problems.add("a reply of " + message.length() + " bytes");
			}
			int n = replies.computeIfAbsent(message.connection(), (peer) -> new AtomicInteger()).incrementAndGet();
			if (n == MESSAGES) {
				message.connection().disconnect(); // on the poller thread: returns at
													// once
			}
		}

	}

}
