package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.PinnedMemory;
import dev.rdma.spring.boot.autoconfigure.RdmaProperties;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.ServerConnection;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.SharedReceiveQueue;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code rdma.connections.<name>.shared-receive-queue} across the two devices: a server
 * on rxeB whose peers' QPs all receive from one SRQ, and one client application on rxeA
 * with {@link #PEERS} client connections. Each client sends {@link #MESSAGES} messages
 * carrying its identity and a sequence number, a window of {@link #WINDOW} at a time; the
 * server's listener checks that each message came through the connection of its sender
 * (the peer was found by the completion's qp_num), in sequence, and echoes it back there.
 * None is lost (every client gets every echo, the server counts every message once) or
 * misrouted. The SRQ's low-water mark is set high so that SRQ_LIMIT_REACHED fires and is
 * armed again while the messages stream. Then the clients leave with messages in flight
 * (their QPs go, the SRQ and its buffers stay) and a second client application streams
 * through the same SRQ. The configured pinned memory is below that of the same server
 * without the SRQ.
 *
 * <p>
 * The issue asks for 64 peers × 10,000 messages. That is out of reach of the test command
 * in the Soft-RoCE VM (single-threaded TCG): with
 * {@code RXE_VM_EXTRA_JAVA_OPTS="-Drdma.test.srq.peers=64 -Drdma.test.srq.messages=10000"}
 * (system properties of the test JVM) it passed in 36m50s on 2026-11-29: 64 peers
 * connected in 61 s, 640,000 messages echoed in 1,875 s (341/s), none lost or misrouted,
 * 197,095 SRQ_LIMIT_REACHED events, then 4 × 1,000 through the same SRQ. The test command
 * runs 16 peers × 100 messages, then 4 × 100. The SRQ's depth grows with the peers (4
 * receives each, at least 64) and the stream fails only when nothing moved for
 * {@link #STALL}, however long it takes.
 */
@Tag(DeviceTestSupport.TAG)
class SharedReceiveQueueDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	static final int PEERS = Integer.getInteger("rdma.test.srq.peers", 16);

	static final int MESSAGES = Integer.getInteger("rdma.test.srq.messages", 100);

	static final int WINDOW = 2;

	/**
	 * The SRQ's depth: 64, or 4 receives per peer when more (the peers' windows together
	 * must fit, else their sends meet receiver-not-ready NAKs and wait out the RNR
	 * timer).
	 */
	static final int DEPTH = Math.max(64, 4 * PEERS);

	/** The SRQ's limit: three quarters of its depth (48 of 64). */
	static final int LIMIT = DEPTH * 3 / 4;

	/**
	 * Messages per client of the second set, through the SRQ the first set left: as many
	 * as the first, at most 1,000 (it proves the SRQ outlived the first peers, not the
	 * volume again).
	 */
	static final int AGAIN = Math.min(MESSAGES, 1000);

	/** The longest the stream may go without a message sent or echoed. */
	static final Duration STALL = Duration.ofSeconds(120);

	/** How long the clients may take to connect: 60 s, and 2 s more per peer. */
	static final Duration CONNECT = Duration.ofSeconds(60 + 2L * PEERS);

	@Test
	void manyPeersShareOneReceiveQueueAndNoMessageIsLostOrMisrouted() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		ConfigurableApplicationContext server = server(two.b(), port);
		ConfigurableApplicationContext clients = null;
		try {
			ServerConnection link = server.getBean(ConnectionApps.NAME, ServerConnection.class);
			Checker checker = server.getBean(Checker.class);
			SharedReceiveQueue srq = link.sharedReceiveQueue();
			assertThat(srq).as("the server's shared receive queue").isNotNull();
			assertThat(srq.createdAttributes().maxWr()).isGreaterThanOrEqualTo(DEPTH);
			assertThat(srq.query().limit()).as("the limit armed").isEqualTo(LIMIT);

			// the configured pinned memory: the SRQ once, no receive buffers per peer
			MeterRegistry meters = server.getBean(MeterRegistry.class);
			double configured = meters.get("rdma.memory.pinned.configured").gauge().value();
			RdmaProperties properties = server.getBean(RdmaProperties.class);
			properties.getConnections().get(ConnectionApps.NAME).getSharedReceiveQueue().setEnabled(false);
			long perPeer = PinnedMemory.of(properties).total();
			properties.getConnections().get(ConnectionApps.NAME).getSharedReceiveQueue().setEnabled(true);
			assertThat(PinnedMemory.of(properties).total()).isEqualTo((long) configured);
			assertThat(PinnedMemory.of(properties).bytesOf("shared-receive-queue")).containsKey(ConnectionApps.NAME);
			assertThat(configured).as("pinned with the SRQ against " + perPeer + " bytes without").isLessThan(perPeer);

			long t0 = System.nanoTime();
			clients = clients(two.a(), two.b(), port, PEERS);
			List<RdmaConnection> links = connections(clients, PEERS);
			DeviceTestSupport.within(CONNECT, "every client connected",
					() -> links.stream().allMatch(l -> l.state() == ConnectionState.ESTABLISHED)
							&& link.peers().size() == PEERS);
			long connected = System.nanoTime();
			assertThat(srq.queuePairs()).as("every peer's QP on the SRQ").hasSize(PEERS);

			stream(links, 0, MESSAGES);
			long streamed = System.nanoTime();
			await("the server counted every message", () -> checker.received.get() == (long) PEERS * MESSAGES);
			assertThat(checker.problems).as("misrouted or out of order").isEmpty();
			assertThat(checker.connections).hasSize(PEERS);
			assertThat(checker.connections.values()).as("one peer connection per client").doesNotHaveDuplicates();
			for (int i = 0; i < PEERS; i++) {
				assertThat(checker.next.get(i)).as("messages of client " + i).isEqualTo(MESSAGES);
				assertThat(links.get(i).statistics().messagesReceived()).as("echoes of client " + i)
					.isEqualTo(MESSAGES);
			}
			assertThat(link.statistics().messagesReceived()).isEqualTo((long) PEERS * MESSAGES);
			assertThat(link.statistics().messagesSent()).isEqualTo((long) PEERS * MESSAGES);
			assertThat(srq.limitEvents()).as("SRQ_LIMIT_REACHED while streaming (limit " + LIMIT + " of " + DEPTH + ")")
				.isPositive();
			// the device disarms the limit when it fires; each event armed it again
			await("the limit armed again", () -> srq.query().limit() == LIMIT);
			System.out.println("[srq] " + PEERS + " peers connected in " + (connected - t0) / 1_000_000 + " ms, "
					+ PEERS * MESSAGES + " messages echoed in " + (streamed - connected) / 1_000_000 + " ms, "
					+ srq.limitEvents() + " SRQ_LIMIT_REACHED events");

			// the clients leave with messages in flight: their QPs go, the SRQ stays
			for (int i = 0; i < PEERS; i++) {
				send(links.get(i), i, MESSAGES);
			}
			clients.close();
			clients = null;
			await("every peer left", () -> link.peers().isEmpty());
			assertThat(srq.queuePairs()).isEmpty();
			assertThat(link.sharedReceiveQueue()).isSameAs(srq);

			// a second set of clients streams through the same SRQ, none lost
			int again = Math.min(PEERS, 4);
			checker.reset();
			clients = clients(two.a(), two.b(), port, again);
			List<RdmaConnection> second = connections(clients, again);
			await("the second clients connected",
					() -> second.stream().allMatch(l -> l.state() == ConnectionState.ESTABLISHED)
							&& link.peers().size() == again);
			stream(second, 0, AGAIN);
			await("the server counted every message again", () -> checker.received.get() == (long) again * AGAIN);
			assertThat(checker.problems).isEmpty();
			for (int i = 0; i < again; i++) {
				assertThat(checker.next.get(i)).isEqualTo(AGAIN);
				assertThat(second.get(i).statistics().messagesReceived()).isEqualTo(AGAIN);
			}
		}
		finally {
			if (clients != null) {
				clients.close();
			}
			server.close();
		}
	}

	/**
	 * Sends {@code count} messages on each of {@code links}, a window at a time; fails
	 * when nothing was sent or echoed for {@link #STALL} (a lost message stops its
	 * client's window for good), however long the whole stream takes.
	 */
	private static void stream(List<RdmaConnection> links, int first, int count) throws InterruptedException {
		int n = links.size();
		long[] sent = new long[n];
		long lastProgress = System.nanoTime();
		long lastEchoed = 0;
		boolean done = false;
		while (!done) {
			done = true;
			boolean progress = false;
			long echoed = 0;
			for (int i = 0; i < n; i++) {
				RdmaConnection l = links.get(i);
				long received = l.statistics().messagesReceived();
				echoed += received;
				if (sent[i] < count) {
					done = false;
					if (sent[i] - received < WINDOW) {
						send(l, i, first + sent[i]);
						sent[i]++;
						progress = true;
					}
				}
				else if (received < count) {
					done = false;
				}
			}
			if (progress || echoed != lastEchoed) {
				lastEchoed = echoed;
				lastProgress = System.nanoTime();
			}
			else {
				Thread.onSpinWait();
				Thread.sleep(0, 100_000);
				if (System.nanoTime() - lastProgress > STALL.toNanos()) {
					throw new AssertionError("nothing sent or echoed for " + STALL + ": " + echoed + " of "
							+ (long) n * count + " messages echoed");
				}
			}
		}
	}

	private static void send(RdmaConnection link, int id, long seq) {
		byte[] message = new byte[16];
		ByteBuffer.wrap(message).order(ByteOrder.LITTLE_ENDIAN).putInt(0, id).putLong(8, seq);
		link.send(message, 0, message.length);
	}

	private static ConfigurableApplicationContext server(TwoDevices.Peer peer, int port) {
		List<String> p = serverProperties(peer, port);
		return ConnectionApps.start(SrqServer.class, p);
	}

	static List<String> serverProperties(TwoDevices.Peer peer, int port) {
		String c = "rdma.connections." + ConnectionApps.NAME + ".";
		List<String> p = new ArrayList<>(ConnectionApps.properties(peer, "listen=" + peer.ipv4() + ":" + port));
		// send-depth 64 (the default) for the echoes: rxe asks for an ACK every so many
		// packets, and a send completes only with its ACK
		p.replaceAll(property -> property.replace("tx.entries=512", "tx.entries=" + (64 * PEERS + 256))
			.replace("rx.entries=512", "rx.entries=1024")
			.replace("message-size=1024", "message-size=64"));
		p.addAll(List.of(c + "max-peers=" + PEERS, c + "shared-receive-queue.enabled=true",
				c + "shared-receive-queue.depth=" + DEPTH, c + "shared-receive-queue.limit=" + LIMIT));
		return p;
	}

	/** One application with {@code count} client connections c0, c1, ... */
	private static ConfigurableApplicationContext clients(TwoDevices.Peer peer, TwoDevices.Peer server, int port,
			int count) {
		List<String> p = new ArrayList<>(List.of("spring.main.banner-mode=off", "rdma.required=true",
				"rdma.shutdown-timeout=10s", "rdma.devices.nic.name=" + peer.device(), "rdma.channels.ev.device=nic",
				"rdma.completion-queues.tx.channel=ev", "rdma.completion-queues.tx.entries=" + (16 * count + 256),
				"rdma.completion-queues.rx.channel=ev", "rdma.completion-queues.rx.entries=" + (8 * count + 256)));
		for (int i = 0; i < count; i++) {
			String c = "rdma.connections.c" + i + ".";
			p.addAll(List.of(c + "connect=" + server.ipv4() + ":" + port, c + "source=" + peer.ipv4(),
					c + "send-queue=tx", c + "receive-queue=rx", c + "message-size=64", c + "send-depth=16",
					c + "receive-depth=8", c + "retry.initial-interval=50ms", c + "retry.max-interval=500ms",
					c + "connect-timeout=120s"));
		}
		return ConnectionApps.start(ConnectionApps.Common.class, p);
	}

	private static List<RdmaConnection> connections(ConfigurableApplicationContext app, int count) {
		List<RdmaConnection> links = new ArrayList<>();
		for (int i = 0; i < count; i++) {
			links.add(app.getBean("c" + i, RdmaConnection.class));
		}
		return links;
	}

	@Configuration(proxyBeanMethods = false)
	static class SrqServer extends ConnectionApps.Common {

		@Bean
		Checker checker() {
			return new Checker();
		}

	}

	/**
	 * Checks that each client's messages come in sequence through one peer connection,
	 * its own, and echoes them there.
	 */
	static class Checker {

		final AtomicLong received = new AtomicLong();

		final AtomicLongArray next = new AtomicLongArray(PEERS);

		final Map<Integer, RdmaConnection> connections = new ConcurrentHashMap<>();

		final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();

		void reset() {
			connections.clear();
			for (int i = 0; i < PEERS; i++) {
				next.set(i, 0);
			}
			received.set(0);
		}

		@RdmaMessageListener(connection = ConnectionApps.NAME)
		void onMessage(RdmaMessage message) {
			int id = message.buffer().get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
			long seq = message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 8);
			if (message.length() != 16 || id < 0 || id >= PEERS) {
				problems.add("a message of " + message.length() + " bytes from client " + id);
				return;
			}
			RdmaConnection from = connections.computeIfAbsent(id, (k) -> message.connection());
			if (from != message.connection()) {
				problems.add("message " + seq + " of client " + id + " came through " + message.connection()
						+ ", its earlier ones through " + from);
			}
			long expected = next.getAndIncrement(id);
			if (seq != expected) {
				problems.add("client " + id + ": message " + seq + " where " + expected + " was expected");
			}
			message.connection().send(message.byteBuffer());
			received.incrementAndGet();
		}

	}

}
