package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.event.RdmaConnectionAttemptFailedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEndedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEstablishedEvent;
import dev.rdma.spring.connection.event.RdmaConnectionEvent;
import dev.rdma.spring.connection.event.RdmaConnectionGaveUpEvent;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionId;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.BDDMockito.given;
import static org.mockito.Mockito.mock;

/**
 * The loop of a {@link ClientConnection}: its attempts, back-off, reconnects, stopping,
 * its events and {@code disconnect()}, on a transport of the test's own (or, for the
 * out-of-band connect, a TCP server that never answers). Without a device: the verbs
 * objects are mocks.
 */
class ClientConnectionTests {

	private final Arena arena = Arena.ofShared();

	private final List<ClientConnection> connections = new ArrayList<>();

	private final List<AutoCloseable> closeables = new ArrayList<>();

	@AfterEach
	void stopEverything() throws Exception {
		for (ClientConnection c : connections) {
			c.stop(System.nanoTime() + Duration.ofSeconds(2).toNanos());
		}
		for (AutoCloseable c : closeables) {
			c.close();
		}
		arena.close();
	}

	private static ConnectionSettings settings(String name, InetSocketAddress address, Duration connectTimeout,
			ConnectionSettings.Retry retry, ConnectionSettings.@Nullable OutOfBandOptions outOfBand) {
		return new ConnectionSettings(name, false, address, null, 1, connectTimeout, retry, "tx", "rx", 2, 1, 1, 64,
				Duration.ofSeconds(1), true, CmParameters.DEFAULTS, Duration.ofSeconds(2), 0, outOfBand);
	}

	private static ConnectionSettings settings(String name, ConnectionSettings.Retry retry) {
		return settings(name, new InetSocketAddress("10.0.0.2", 7471), Duration.ofSeconds(5), retry, null);
	}

	/** Completion queues whose device gives protection domains of mocks. */
	private CompletionQueue queue() {
		CompletionQueue cq = mock(CompletionQueue.class);
		Context context = mock(Context.class);
		ProtectionDomain pd = mock(ProtectionDomain.class);
		given(cq.context()).willReturn(context);
		given(context.deviceName()).willReturn("rxe0");
		given(context.allocateProtectionDomain()).willReturn(pd);
		given(pd.context()).willReturn(context);
		given(pd.createQueuePair(any())).willAnswer((invocation) -> {
			QueuePair qp = mock(QueuePair.class);
			given(qp.protectionDomain()).willReturn(pd);
			return qp;
		});
		given(pd.registerMemory(anyLong(), any())).willAnswer((invocation) -> {
			MemoryRegion mr = mock(MemoryRegion.class);
			given(mr.buffer()).willReturn(arena.allocate((long) invocation.getArgument(0)));
			return mr;
		});
		return cq;
	}

	private ClientConnection client(ConnectionSettings settings, @Nullable ClientTransport transport) {
		CompletionQueue cq = queue();
		List<CompletionRouter> routers = List.of(new CompletionRouter("tx"), new CompletionRouter("rx"));
		ClientConnection c = (transport != null)
				? new ClientConnection(settings, cq, cq, routers, () -> null, transport)
				: new ClientConnection(settings, cq, cq, routers, () -> null);
		connections.add(c);
		return c;
	}

	private static List<Thread> threads(String name) {
		return Thread.getAllStackTraces()
			.keySet()
			.stream()
			.filter((t) -> t.isAlive() && t.getName().equals(name))
			.toList();
	}

	private static void await(String what, BooleanSupplier condition) throws InterruptedException {
		long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
		while (!condition.getAsBoolean()) {
			if (System.nanoTime() - deadline > 0) {
				throw new AssertionError("not within 10 s: " + what);
			}
			Thread.sleep(5);
		}
	}

	/** What one attempt of the {@link FakeTransport} does. */
	interface Step {

		/** Connects (a peer of {@code attempt}) or throws. */
		PeerConnection connect(FakeAttempt attempt) throws Exception;

	}

	/**
	 * A transport whose attempts follow {@code steps} (the last one repeats); each
	 * attempt is recorded with its thread and time; an established connection ends at
	 * once (DISCONNECTED).
	 */
	static final class FakeTransport implements ClientTransport {

		final List<Step> steps;

		final List<Thread> attemptThreads = new CopyOnWriteArrayList<>();

		final List<Long> attemptTimes = new CopyOnWriteArrayList<>();

		/** Whether an established connection lasts until stopped or disconnected. */
		volatile boolean lasts;

		FakeTransport(Step... steps) {
			this.steps = List.of(steps);
		}

		@Override
		public void open(ConfiguredConnection connection) {
			connection.openProtectionDomain();
		}

		@Override
		public Attempt newAttempt(ClientConnection connection) {
			return new FakeAttempt(connection, this);
		}

		int attempts() {
			return attemptThreads.size();
		}

	}

	static final class FakeAttempt extends PendingPeer implements ClientTransport.Attempt {

		private final FakeTransport transport;

		FakeAttempt(ClientConnection connection, FakeTransport transport) {
			super(connection);
			this.transport = transport;
		}

		PeerConnection connected() {
			return newPeer(new PeerLink.Cm(mock(ConnectionId.class)));
		}

		@Override
		public PeerConnection connect(long deadline) {
			int n = transport.attempts();
			transport.attemptThreads.add(Thread.currentThread());
			transport.attemptTimes.add(System.nanoTime());
			try {
				return transport.steps.get(Math.min(n, transport.steps.size() - 1)).connect(this);
			}
			catch (RuntimeException ex) {
				throw ex;
			}
			catch (Exception ex) {
				throw new IllegalStateException(ex);
			}
		}

		@Override
		public ClientTransport.@Nullable End awaitEnd() {
			while (this.transport.lasts && this.connection.running()) {
				try {
					Thread.sleep(2);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return null;
				}
			}
			return this.transport.lasts ? null : new ClientTransport.End("DISCONNECTED", "the test ended it");
		}

		@Override
		public void acknowledgeEnd() {
		}

		@Override
		public void wakeUp() {
			// a connect that cannot be woken up
		}

		@Override
		void release() {
		}

	}

	private static PeerConnection refused(FakeAttempt attempt) {
		throw new AttemptFailedException("UNREACHABLE", "refused by the test");
	}

	@Test
	void aThreadThatOutlivedStopNeverResumesAfterTheNextStart() throws Exception {
		CountDownLatch release = new CountDownLatch(1);
		CountDownLatch blocked = new CountDownLatch(1);
		FakeTransport transport = new FakeTransport((attempt) -> {
			blocked.countDown();
			release.await(10, TimeUnit.SECONDS); // ignores wakeUp
			throw new AttemptFailedException("TIMEOUT", "the stuck connect gave up");
		}, ClientConnectionTests::refused);
		ClientConnection client = started("stale",
				new ConnectionSettings.Retry(Duration.ofMillis(20), 1, Duration.ofMillis(20), 0), transport);
		assertThat(blocked.await(5, TimeUnit.SECONDS)).isTrue();
		Thread old = transport.attemptThreads.get(0);
		client.stop(System.nanoTime() + Duration.ofMillis(200).toNanos());
		assertThat(old.isAlive()).as("the stuck thread outlived stop (the test's premise)").isTrue();

		client.start();
		await("the new thread's attempts", () -> transport.attempts() >= 3);
		Thread current = transport.attemptThreads.get(transport.attempts() - 1);
		assertThat(current).isNotSameAs(old);

		release.countDown();
		old.join(5000);
		assertThat(old.isAlive()).as("the old thread ended").isFalse();
		Thread.sleep(200);
		assertThat(transport.attemptThreads.stream().filter((t) -> t == old).count())
			.as("attempts made by the old thread")
			.isEqualTo(1);
		assertThat(threads("rdma-connect-stale")).containsExactly(current);
	}

	@Test
	void stopEndsAnOutOfBandConnectToAServerThatDoesNotAnswer() throws Exception {
		// a listening socket whose accept queue is full: the kernel drops further SYNs,
		// so a connect to it waits until its timeout
		ServerSocketChannel silent = ServerSocketChannel.open();
		closeables.add(silent);
		silent.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 1);
		InetSocketAddress address = (InetSocketAddress) silent.getLocalAddress();
		for (int i = 0; i < 8; i++) {
			SocketChannel filler = SocketChannel.open();
			closeables.add(filler);
			filler.configureBlocking(false);
			filler.connect(address);
		}
		Thread.sleep(100);
		ClientConnection client = client(settings("silent", address, Duration.ofSeconds(20),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 1, Duration.ofMillis(100), 0),
				new ConnectionSettings.OutOfBandOptions(1, -1)), null);
		client.start();
		Thread.sleep(500);
		assertThat(client.statistics().connectionErrors()).as("the connect still waits (the test's premise)").isEmpty();
		List<Thread> loop = threads("rdma-connect-silent");
		assertThat(loop).hasSize(1);

		long start = System.nanoTime();
		client.stop(System.nanoTime() + Duration.ofSeconds(4).toNanos());
		Duration took = Duration.ofNanos(System.nanoTime() - start);
		assertThat(took).as("stop during the connect").isLessThan(Duration.ofMillis(1500));
		assertThat(loop.get(0).isAlive()).as("the connect thread ended").isFalse();

		client.start();
		Thread.sleep(300);
		assertThat(threads("rdma-connect-silent")).as("one loop after the restart").hasSize(1);
	}

	@Test
	void maxAttemptsCountsTheFailedReconnectAttemptsAfterAnEndAndTheBackOffStartsAgain() throws Exception {
		FakeTransport transport = new FakeTransport(FakeAttempt::connected, ClientConnectionTests::refused);
		ClientConnection client = started("retry",
				new ConnectionSettings.Retry(Duration.ofMillis(20), 10, Duration.ofSeconds(5), 3), transport);
		await("the client gave up", () -> threads("rdma-connect-retry").isEmpty());
		// the connection, then max-attempts (3) failed reconnect attempts
		assertThat(transport.attempts()).isEqualTo(4);
		assertThat(client.statistics().connectionErrors()).containsEntry("DISCONNECTED", 1L)
			.containsEntry("UNREACHABLE", 3L);
		List<Long> t = transport.attemptTimes;
		// after the end: interval(1) = 20 ms before the first reconnect, interval(1)
		// after its failure, interval(2) = 200 ms after the second failure
		assertThat(Duration.ofNanos(t.get(2) - t.get(1))).as("back-off after the first failed reconnect")
			.isLessThan(Duration.ofMillis(150));
		assertThat(Duration.ofNanos(t.get(3) - t.get(2))).as("back-off after the second failed reconnect")
			.isGreaterThanOrEqualTo(Duration.ofMillis(190));
	}

	@Test
	void aClientWaitingForItsNextAttemptIsConnectingAndOneThatGaveUpIsDisconnected() throws Exception {
		FakeTransport transport = new FakeTransport(ClientConnectionTests::refused);
		ClientConnection client = started("gives-up",
				new ConnectionSettings.Retry(Duration.ofMillis(500), 1, Duration.ofMillis(500), 2), transport);
		await("the first failed attempt", () -> client.statistics().connectionErrors().containsKey("UNREACHABLE"));
		Thread.sleep(100); // within the back-off of 500 ms
		assertThat(transport.attempts()).isEqualTo(1);
		assertThat(client.state()).as("waiting (back-off) before the next attempt")
			.isEqualTo(ConnectionState.CONNECTING);
		assertThat(client.isUp()).isFalse();
		await("the client gave up", () -> threads("rdma-connect-gives-up").isEmpty());
		assertThat(transport.attempts()).isEqualTo(2);
		assertThat(client.state()).as("gave up after max-attempts").isEqualTo(ConnectionState.DISCONNECTED);
	}

	@Test
	void aClientWhoseConnectionEndedIsConnectingDuringItsBackOff() throws Exception {
		FakeTransport transport = new FakeTransport(FakeAttempt::connected, ClientConnectionTests::refused);
		ClientConnection client = started("ended",
				new ConnectionSettings.Retry(Duration.ofMillis(500), 1, Duration.ofMillis(500), 0), transport);
		await("the end of the connection", () -> client.statistics().connectionErrors().containsKey("DISCONNECTED")
				&& client.state() != ConnectionState.ESTABLISHED);
		Thread.sleep(100); // within the back-off of 500 ms
		assertThat(transport.attempts()).isEqualTo(1);
		assertThat(client.state()).as("waiting (back-off) to reconnect").isEqualTo(ConnectionState.CONNECTING);
		assertThat(client.isUp()).isFalse();
	}

	/** A started client of {@code transport} named {@code name}, with {@code retry}. */
	private ClientConnection started(String name, ConnectionSettings.Retry retry, FakeTransport transport) {
		ClientConnection client = client(settings(name, retry), transport);
		client.start();
		return client;
	}

	private static ConnectionSettings.Retry quickly(int maxAttempts) {
		return new ConnectionSettings.Retry(Duration.ofMillis(10), 1, Duration.ofMillis(10), maxAttempts);
	}

	/** A client whose one connection lasts until stopped or disconnected. */
	private ClientConnection lastingClient(String name, FakeTransport transport) {
		transport.lasts = true;
		return client(settings(name, quickly(0)), transport);
	}

	/** The events {@code client} publishes, and the thread of each. */
	private static final class Recorded {

		final List<RdmaConnectionEvent> events = new CopyOnWriteArrayList<>();

		final List<String> threads = new CopyOnWriteArrayList<>();

		Recorded(ClientConnection client) {
			client.setEventPublisher((event) -> {
				this.events.add((RdmaConnectionEvent) event);
				this.threads.add(Thread.currentThread().getName());
			});
		}

	}

	@Test
	void aClientThatGivesUpPublishesEachFailedAttemptThenGaveUpOnItsThread() throws Exception {
		FakeTransport transport = new FakeTransport(ClientConnectionTests::refused);
		ClientConnection client = client(settings("events", quickly(3)), transport);
		Recorded recorded = new Recorded(client);
		List<RdmaConnectionEvent> events = recorded.events;
		client.start();
		await("the client gave up", () -> threads("rdma-connect-events").isEmpty());
		assertThat(events).hasSize(4);
		for (int i = 0; i < 3; i++) {
			RdmaConnectionAttemptFailedEvent failed = (RdmaConnectionAttemptFailedEvent) events.get(i);
			assertThat(failed.getConnection()).isSameAs(client);
			assertThat(failed.getConnectionName()).isEqualTo("events");
			assertThat(failed.getAttempt()).isEqualTo(i + 1);
			assertThat(failed.getKind()).isEqualTo("UNREACHABLE");
			assertThat(failed.getError()).hasMessageContaining("refused by the test");
			assertThat(failed.getNextAttemptIn()).isEqualTo((i < 2) ? Duration.ofMillis(10) : null);
		}
		RdmaConnectionGaveUpEvent gaveUp = (RdmaConnectionGaveUpEvent) events.get(3);
		assertThat(gaveUp.getAttempts()).isEqualTo(3);
		assertThat(gaveUp.getLastError()).hasMessageContaining("refused by the test");
		assertThat(recorded.threads).containsOnly("rdma-connect-events");
		assertThat(client.state()).isEqualTo(ConnectionState.DISCONNECTED);
	}

	@Test
	void aConnectionThatEndsPublishesEstablishedThenEndedWithTheEndsKind() throws Exception {
		FakeTransport transport = new FakeTransport(FakeAttempt::connected, ClientConnectionTests::refused);
		ClientConnection client = client(settings("ends", quickly(1)), transport);
		List<RdmaConnectionEvent> events = new Recorded(client).events;
		client.start();
		await("the client gave up", () -> threads("rdma-connect-ends").isEmpty());
		assertThat(events).hasSize(4);
		RdmaConnectionEstablishedEvent established = (RdmaConnectionEstablishedEvent) events.get(0);
		RdmaConnectionEndedEvent ended = (RdmaConnectionEndedEvent) events.get(1);
		assertThat(established.getDeviceName()).isEqualTo("rxe0");
		assertThat(ended.getPeer()).isSameAs(established.getPeer());
		assertThat(ended.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.DISCONNECTED);
		assertThat(ended.getDetail()).isEqualTo("DISCONNECTED");
		assertThat(ended.getPeer().state()).isEqualTo(ConnectionState.DISCONNECTED);
		assertThat(events.get(2)).isInstanceOf(RdmaConnectionAttemptFailedEvent.class);
		assertThat(events.get(3)).isInstanceOf(RdmaConnectionGaveUpEvent.class);
	}

	@Test
	void disconnectClosesTheConnectionOnTheClientsThreadWhichThenStaysDisconnectedUntilStartedAgain() throws Exception {
		FakeTransport transport = new FakeTransport(FakeAttempt::connected);
		ClientConnection client = lastingClient("app", transport);
		Recorded recorded = new Recorded(client);
		List<RdmaConnectionEvent> events = recorded.events;
		client.start();
		await("established", () -> client.state() == ConnectionState.ESTABLISHED);
		RdmaConnection peer = client.peers().get(0);

		peer.disconnect(); // as a message listener would, through message.connection()
		assertThatExceptionOfType(ConnectionNotEstablishedException.class).as("a send after disconnect() returned")
			.isThrownBy(() -> client.send(new byte[8]));
		await("the client's thread ended", () -> threads("rdma-connect-app").isEmpty());
		assertThat(client.state()).isEqualTo(ConnectionState.DISCONNECTED);
		assertThat(client.peers()).isEmpty();
		assertThat(peer.state()).isEqualTo(ConnectionState.CLOSED);
		assertThat(events).hasSize(2);
		RdmaConnectionEndedEvent ended = (RdmaConnectionEndedEvent) events.get(1);
		assertThat(ended.getPeer()).isSameAs(peer);
		assertThat(ended.getCause()).isEqualTo(RdmaConnectionEndedEvent.Cause.APPLICATION);
		assertThat(recorded.threads).containsOnly("rdma-connect-app");
		client.disconnect(); // idempotent
		peer.disconnect();
		Thread.sleep(100);
		assertThat(transport.attempts()).as("no reconnect after disconnect()").isEqualTo(1);
		assertThat(client.statistics().connectionErrors()).as("not an error").isEmpty();

		client.stop(System.nanoTime() + Duration.ofSeconds(2).toNanos());
		client.start();
		await("connected again once started again", () -> client.state() == ConnectionState.ESTABLISHED);
		assertThat(transport.attempts()).isEqualTo(2);
	}

	@Test
	void aListenerThatThrowsDoesNotEndTheConnectionsThread() throws Exception {
		ClientConnection client = lastingClient("throws", new FakeTransport(FakeAttempt::connected));
		client.setEventPublisher((event) -> {
			throw new IllegalStateException("a listener that throws");
		});
		client.start();
		await("established", () -> client.state() == ConnectionState.ESTABLISHED);
		Thread.sleep(100);
		assertThat(client.state()).isEqualTo(ConnectionState.ESTABLISHED);
		assertThat(threads("rdma-connect-throws")).hasSize(1);
	}

}
