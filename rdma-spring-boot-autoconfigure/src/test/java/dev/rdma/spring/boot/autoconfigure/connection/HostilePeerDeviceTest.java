package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;

import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaConnectionFilter;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.spring.connection.support.RemoteRegion;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionException;
import dev.rdma.verbs.exchange.Endpoint;
import dev.rdma.verbs.exchange.PingpongWire;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.exchange;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A server of this starter facing a peer it does not control ({@link HostilePeer}, Java
 * on the bindings) across the two devices, while a well-behaved client of the starter
 * keeps exchanging messages with it: rdma_cm requests from an address outside
 * {@code allowed-peers}, refused by a filter bean, with malformed private data, a
 * half-open connect, a message larger than {@code message-size}, an RDMA WRITE with the
 * rkey of the peer's previous connection, and floods of connect requests (half-open and
 * malformed ones, back to back). Each refusal is read back from the reject's private
 * data, counted, published; the resources of the process (native objects,
 * {@code /proc/self/fd}, {@code rdma resource show}) are the same after as before.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 400, unit = TimeUnit.SECONDS)
class HostilePeerDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest(Duration.ofSeconds(60));

	private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);

	/**
	 * The rdma_cm server's connect-timeout: how long a half-open peer holds its place.
	 * Each flood's requests must all be read before the first accepted one is dropped, or
	 * a place freed by a drop is taken again and the counts below differ. Under emulation
	 * the server read 2.5 valid requests a second on a host at load 10 (an accept makes a
	 * QP and registers a region), so 8 requests took about 3 s.
	 */
	private static final Duration CM_CONNECT_TIMEOUT = Duration.ofSeconds(8);

	private static final String EVIL = "EVIL";

	/** The server's max-peers in the rdma_cm test. */
	private static final int MAX_PEERS = 4;

	/** The well-behaved client's connect-timeout in the rdma_cm test. */
	private static final Duration CLIENT_CONNECT_TIMEOUT = Duration.ofSeconds(5);

	/**
	 * The malformed connect requests of each rdma_cm flood: with the valid ones (5),
	 * fewer than the listener's backlog (8), so that each is read by the server. Requests
	 * beyond the backlog are rejected by the kernel without private data (seen with 30),
	 * which the answers to malformed requests allow for.
	 */
	private static final int MALFORMED = 2;

	/**
	 * The malformed connect requests of the burst beyond the listener's backlog (8): 30
	 * took the server 13 s to answer in the VM (each refusal is an rdma_reject and an
	 * rdma_destroy_id, counted and published), none rejected by the kernel.
	 */
	private static final int BURST = 16;

	/** The echo server, and a filter that refuses private data starting with EVIL. */
	@Configuration(proxyBeanMethods = false)
	static class GuardedServer extends ConnectionApps.EchoServer {

		@Bean
		RdmaConnectionFilter noEvil() {
			return (request) -> new String(request.privateData(), StandardCharsets.US_ASCII).startsWith(EVIL)
					? "no evil peers" : null;
		}

	}

	@Test
	void rdmaCmServerRefusesHostilePeersAndKeepsServingItsClient() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		List<String> p = ConnectionApps.properties(two.b(), "listen=" + two.b().ipv4() + ":" + port);
		String c = "rdma.connections." + ConnectionApps.NAME + ".";
		p.addAll(List.of(c + "allowed-peers=" + two.a().ipv4() + "/32,fd00::/8", c + "max-peers=" + MAX_PEERS,
				c + "connect-timeout=" + CM_CONNECT_TIMEOUT.toMillis() + "ms", c + "remote-access-size=64KB"));
		InetSocketAddress server = new InetSocketAddress(InetAddress.getByName(two.b().ipv4()), port);
		try (ConfigurableApplicationContext serverApp = ConnectionApps.start(GuardedServer.class, p);
				ConfigurableApplicationContext clientApp = ConnectionApps.client(two.a(), two.b(), port,
						"connect-timeout=" + CLIENT_CONNECT_TIMEOUT.toMillis() + "ms")) {
			RdmaConnection serverLink = serverApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
			RdmaConnection link = clientApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
			ConnectionApps.Collector collector = clientApp.getBean(ConnectionApps.Collector.class);
			ConnectionApps.Events events = serverApp.getBean(ConnectionApps.Events.class);
			MeterRegistry meters = serverApp.getBean(MeterRegistry.class);
			step("both applications started");
			// both sides: each reads its own ESTABLISHED on its own thread, in either
			// order
			await("the well-behaved client connected (client " + link + ")",
					() -> link.state() == ConnectionState.ESTABLISHED && serverLink.peers().size() == 1);
			step("the client connected");
			events.all.clear(); // a first attempt of the client's that failed under load
								// is no attack
			exchange(link, collector, 0, 20, 64);
			long serverObjects = NativeObjects.open();
			long fds = openFds();
			Map<String, Long> resources = rdmaResources();
			step("resources before the attacks: " + NativeObjects.openByType() + ", " + fds
					+ " fds, rdma resource show " + resources);
			long seq = 20;

			// 1. an address outside allowed-peers (rxeB's own, a loopback connect)
			try (HostilePeer outsider = new HostilePeer(two.b().device(), two.b().ipv4())) {
				assertRejected(outsider.attempt(server, new byte[0]), "address not allowed");
			}
			assertRefused(events, RdmaPeerRefusedEvent.Reason.NOT_ALLOWED, two.b().ipv4());
			try (HostilePeer hostile = new HostilePeer(two.a().device(), two.a().ipv4())) {
				step("2. a filter");
				// 2. a filter bean refuses it by its private data
				assertRejected(hostile.attempt(server, (EVIL + "!").getBytes(StandardCharsets.US_ASCII)),
						"no evil peers");
				assertRefused(events, RdmaPeerRefusedEvent.Reason.FILTERED, two.a().ipv4());
				// 3. malformed region records: another version, a length of 0, an end
				// that overflows
				byte[] version = new RemoteRegion(0x1000, 1, 4096).encode();
				version[7] = '9';
				assertRejected(hostile.attempt(server, version),
						"malformed private data: a region record of an " + "unsupported version");
				assertRefused(events, RdmaPeerRefusedEvent.Reason.MALFORMED, two.a().ipv4());
				byte[] empty = new RemoteRegion(0x1000, 1, 4096).encode();
				java.nio.ByteBuffer.wrap(empty).putLong(20, 0);
				assertRejected(hostile.attempt(server, empty), "a region record of length 0");
				assertRefused(events, RdmaPeerRefusedEvent.Reason.MALFORMED, two.a().ipv4());
				assertRejected(hostile.attempt(server, new RemoteRegion(-4096, 1, 8192).encode()),
						"overflows the address space");
				assertRefused(events, RdmaPeerRefusedEvent.Reason.MALFORMED, two.a().ipv4());
				exchange(link, collector, seq, 20, 64);
				seq += 20;

				step("4. half-open");
				// 4. half-open: the server's accept gives up at connect-timeout
				long start = System.nanoTime();
				CmEvent answer = hostile.halfOpen(server);
				assertThat(answer.type()).isEqualTo(CmEventType.CONNECT_RESPONSE);
				RdmaPeerRefusedEvent failed = events.next(RdmaPeerRefusedEvent.class);
				Duration held = Duration.ofNanos(System.nanoTime() - start);
				assertThat(failed.getReason()).isEqualTo(RdmaPeerRefusedEvent.Reason.ACCEPT_FAILED);
				assertThat(held).as("a half-open peer dropped within connect-timeout")
					.isLessThan(CM_CONNECT_TIMEOUT.plusSeconds(2));
				assertThat(serverLink.peers()).hasSize(1);
				exchange(link, collector, seq, 20, 64);
				seq += 20;

				step("5. a message larger");
				// 5. a message larger than message-size (1024): that peer's connection
				// ends, the other one goes on
				Object accepted = hostile.attempt(server, new byte[0]);
				assertThat(accepted).isInstanceOf(CmEvent.class);
				await("the hostile peer listed", () -> serverLink.peers().size() == 2);
				WcStatus oversize = hostile.post(2048, null, null);
				assertThat(oversize).as("the sender's view of a 2048-byte message to 1024-byte receives")
					.isNotEqualTo(WcStatus.SUCCESS);
				await("the oversize peer dropped", () -> serverLink.peers().size() == 1);
				exchange(link, collector, seq, 50, 64);
				seq += 50;

				step("6. a stale rkey");
				// 6. a stale rkey: the region of its previous connection is gone
				CmEvent first = (CmEvent) hostile.attempt(server, new byte[0]);
				RemoteRegion old = RemoteRegion.parse(first.privateData());
				assertThat(old).as("the server's region record").isNotNull();
				assertThat(hostile.post(64, old.address(), old.rkey())).as("a write while connected")
					.isEqualTo(WcStatus.SUCCESS);
				// the first connection ends before the second asks (with max-peers 2, the
				// client and one hostile peer, asked at once the server still listed the
				// first and refused the second with MAX_PEERS in run 18)
				hostile.closeAttempt();
				await("the hostile peer's first connection gone", () -> serverLink.peers().size() == 1);
				Object second = hostile.attempt(server, new byte[0]);
				assertThat(second).isInstanceOf(CmEvent.class);
				await("the hostile peer listed again", () -> serverLink.peers().size() == 2);
				long before = checksum(serverLink);
				WcStatus stale = hostile.post(64, old.address(), old.rkey());
				assertThat(stale).as("an RDMA WRITE with the previous connection's rkey")
					.isEqualTo(WcStatus.REM_ACCESS_ERR);
				assertThat(checksum(serverLink)).as("the server's regions").isEqualTo(before);
			}
			await("the hostile peer's connection closed", () -> serverLink.peers().size() == 1);
			exchange(link, collector, seq, 50, 64);
			seq += 50;
			assertThat(link.statistics().reconnects()).as("the well-behaved client never reconnected").isZero();

			// 7. rdma_cm floods: connect requests back to back, the valid ones never
			// established (half-open), among malformed ones; then a burst of malformed
			// ones beyond the listener's backlog
			step("7. rdma_cm floods");
			AtomicInteger refusedMalformed = new AtomicInteger();
			try (HostilePeer flooder = new HostilePeer(two.a().device(), two.a().ipv4())) {
				floodBeyondMaxPeers(flooder, server, events, refusedMalformed);
				seq = clientConnectsDuringFlood(flooder, server, clientApp, serverLink, events, seq, refusedMalformed);
				burstBeyondTheBacklog(flooder, server, serverLink, refusedMalformed);
			}
			exchange(link, collector, seq, 50, 64);

			step("attacks done");
			assertThat(rejected(meters, "NOT_ALLOWED")).isEqualTo(1);
			assertThat(rejected(meters, "FILTERED")).isEqualTo(1);
			assertThat(rejected(meters, "MALFORMED")).isEqualTo(3 + refusedMalformed.get());
			assertThat(rejected(meters, "MAX_PEERS")).isEqualTo(2);
			await("the server's objects back to their count before the attacks",
					() -> NativeObjects.open() == serverObjects);
			await("the process's file descriptors back to their count", () -> openFds() <= fds);
			await("rdma resource show: qp, cm_id, mr, pd and cq back to their counts before the attacks",
					() -> rdmaResources().equals(resources));
			step("resources after the attacks: " + NativeObjects.openByType() + ", " + openFds()
					+ " fds, rdma resource show " + rdmaResources());
		}
	}

	/**
	 * MAX_PEERS + 1 valid connect requests (never established) and {@link #MALFORMED}
	 * malformed ones, back to back, while the client is connected: the server accepts
	 * MAX_PEERS - 1 (the client and the pending peers make max-peers, never more), turns
	 * 2 away as busy and refuses the malformed ones; each accepted one is dropped within
	 * connect-timeout.
	 */
	private static void floodBeyondMaxPeers(HostilePeer flooder, InetSocketAddress server, ConnectionApps.Events events,
			AtomicInteger refusedMalformed) throws InterruptedException {
		int valid = MAX_PEERS + 1;
		try (HostilePeer.Flood flood = flooder.prepareFlood(server, valid + MALFORMED)) {
			events.all.clear();
			long start = System.nanoTime();
			long fired = flood.fire(0, valid, new byte[0]) + flood.fire(valid, valid + MALFORMED, malformed());
			step(String.format("7a. %d connect requests sent in %.1f ms (%.0f/s)", valid + MALFORMED, fired / 1e6,
					(valid + MALFORMED) / (fired / 1e9)));
			int accepted = 0;
			int busy = 0;
			for (int i = 0; i < valid; i++) {
				CmEvent e = flood.answer(i);
				if (e.type() == CmEventType.CONNECT_RESPONSE) {
					accepted++;
				}
				else {
					assertThat(e.type()).as(e.toString()).isEqualTo(CmEventType.REJECTED);
					assertThat(new String(e.privateData(), StandardCharsets.US_ASCII))
						.startsWith("rdma-spring-boot: max-peers reached");
					busy++;
				}
			}
			int refused = 0;
			for (int i = valid; i < valid + MALFORMED; i++) {
				refused += assertMalformed(flood.answer(i));
			}
			refusedMalformed.addAndGet(refused);
			long answered = (System.nanoTime() - start) / 1_000_000;
			step("7a. answered: " + accepted + " accepted, " + busy + " busy, " + refused + " refused as malformed, "
					+ (MALFORMED - refused) + " rejected by the kernel (listen backlog full), after " + answered
					+ " ms");
			assertThat(accepted)
				.as("accepted while the client is connected (max-peers " + MAX_PEERS + "; every request answered after "
						+ answered + " ms, connect-timeout " + CM_CONNECT_TIMEOUT.toMillis() + " ms)")
				.isEqualTo(MAX_PEERS - 1);
			assertThat(busy).isEqualTo(2);
			Duration dropped = awaitDropped(events, accepted, start);
			step("7a. every half-open peer dropped " + dropped.toMillis() + " ms after the flood began; the peer saw "
					+ flood.next(0, Duration.ofSeconds(1)));
			assertThat(dropped).as("half-open peers dropped within connect-timeout (and the margin)")
				.isLessThan(CM_CONNECT_TIMEOUT.plusSeconds(5));
		}
	}

	/**
	 * {@link #BURST} malformed connect requests back to back, twice the listener's
	 * backlog: each is answered REJECTED, by the server with its reason or by the kernel
	 * without private data if its backlog overflows, and the server still lists its
	 * client only.
	 */
	private static void burstBeyondTheBacklog(HostilePeer flooder, InetSocketAddress server, RdmaConnection serverLink,
			AtomicInteger refusedMalformed) {
		try (HostilePeer.Flood flood = flooder.prepareFlood(server, BURST)) {
			long start = System.nanoTime();
			long fired = flood.fire(0, BURST, malformed());
			int refused = 0;
			for (int i = 0; i < BURST; i++) {
				refused += assertMalformed(flood.answer(i));
			}
			refusedMalformed.addAndGet(refused);
			step(String.format(
					"7c. %d malformed requests sent in %.1f ms (%.0f/s), all answered after %d ms: %d refused "
							+ "by the server, %d rejected by the kernel (listen backlog full)",
					BURST, fired / 1e6, BURST / (fired / 1e9), (System.nanoTime() - start) / 1_000_000, refused,
					BURST - refused));
			assertThat(refused).as("requests the server read and refused").isPositive();
			assertThat(serverLink.peers()).hasSize(1);
		}
	}

	/**
	 * The client goes away and connects again while a flood of MAX_PEERS - 2 half-open
	 * and {@link #MALFORMED} malformed connect requests is pending: within its
	 * connect-timeout (accepted one after the other, the half-open peers alone held the
	 * accept for 2 x connect-timeout, 16 s), and its messages go through.
	 * @return the next sequence number of the client's messages
	 */
	private static long clientConnectsDuringFlood(HostilePeer flooder, InetSocketAddress server,
			ConfigurableApplicationContext clientApp, RdmaConnection serverLink, ConnectionApps.Events events, long seq,
			AtomicInteger refusedMalformed) throws InterruptedException {
		int halfOpen = MAX_PEERS - 2;
		RdmaConnection link = clientApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
		ConnectionApps.Collector collector = clientApp.getBean(ConnectionApps.Collector.class);
		try (HostilePeer.Flood flood = flooder.prepareFlood(server, halfOpen + MALFORMED)) {
			RdmaConnectionRegistry clientConnections = clientApp.getBean(RdmaConnectionRegistry.class);
			clientConnections.stop();
			await("the client gone", () -> serverLink.peers().isEmpty());
			events.all.clear();
			long start = System.nanoTime();
			// the half-open requests first, then the client (on its own thread) amid the
			// malformed ones
			flood.fire(0, halfOpen, new byte[0]);
			clientConnections.start();
			flood.fire(halfOpen, halfOpen + MALFORMED, malformed());
			await("the client connected again during the flood",
					() -> serverLink.peers().size() == 1 && link.state() == ConnectionState.ESTABLISHED);
			Duration again = Duration.ofNanos(System.nanoTime() - start);
			long droppedBefore = events.all.stream()
				.filter((e) -> e instanceof RdmaPeerRefusedEvent r
						&& r.getReason() == RdmaPeerRefusedEvent.Reason.ACCEPT_FAILED)
				.count();
			step("7b. the client connected again " + again.toMillis() + " ms after the flood began, "
					+ (halfOpen - droppedBefore) + " of the " + halfOpen + " half-open peers still pending");
			for (int i = 0; i < halfOpen; i++) {
				assertThat(flood.answer(i).type()).as("a half-open request accepted")
					.isEqualTo(CmEventType.CONNECT_RESPONSE);
			}
			int refused = 0;
			for (int i = halfOpen; i < halfOpen + MALFORMED; i++) {
				refused += assertMalformed(flood.answer(i));
			}
			refusedMalformed.addAndGet(refused);
			step("7b. " + refused + " refused as malformed, " + (MALFORMED - refused)
					+ " rejected by the kernel (listen backlog full)");
			assertThat(again).as("the well-behaved client connects during the flood within its connect-timeout")
				.isLessThan(CLIENT_CONNECT_TIMEOUT);
			exchange(link, collector, seq, 50, 64);
			Duration dropped = awaitDropped(events, halfOpen, start);
			step("7b. every half-open peer dropped " + dropped.toMillis() + " ms after the flood began");
			assertThat(serverLink.peers()).hasSize(1);
			return seq + 50;
		}
	}

	/** A region record of an unsupported version: refused as MALFORMED. */
	private static byte[] malformed() {
		byte[] version = new RemoteRegion(0x1000, 1, 4096).encode();
		version[7] = '9';
		return version;
	}

	/**
	 * A malformed request's answer: REJECTED, by the server with its reason (1), or by
	 * the kernel without private data when the listener's backlog of requests not yet
	 * read was full (0).
	 */
	private static int assertMalformed(CmEvent answer) {
		assertThat(answer.type()).as(answer.toString()).isEqualTo(CmEventType.REJECTED);
		String text = new String(answer.privateData(), StandardCharsets.US_ASCII);
		if (text.isBlank() || text.charAt(0) == 0) {
			return 0;
		}
		assertThat(text).as("the reject's private data")
			.startsWith("rdma-spring-boot: refused: ")
			.contains("malformed private data");
		return 1;
	}

	/**
	 * Waits for {@code n} ACCEPT_FAILED refusals (the half-open peers dropped), passing
	 * over the others: the time since {@code start} ({@link System#nanoTime()}).
	 */
	private static Duration awaitDropped(ConnectionApps.Events events, int n, long start) throws InterruptedException {
		int seen = 0;
		while (seen < n) {
			RdmaPeerRefusedEvent e = events.next(RdmaPeerRefusedEvent.class);
			if (e.getReason() == RdmaPeerRefusedEvent.Reason.ACCEPT_FAILED) {
				assertThat(e.getDetail()).contains("no [ESTABLISHED] within rdma.connections.link.connect-timeout (");
				seen++;
			}
		}
		return Duration.ofNanos(System.nanoTime() - start);
	}

	/**
	 * The counts of qp, cm_id, mr, pd and cq of {@code rdma resource show}, summed over
	 * the devices.
	 */
	static Map<String, Long> rdmaResources() {
		String out;
		try {
			out = DeviceTestSupport.run(20, "rdma", "resource", "show");
		}
		catch (java.io.IOException | InterruptedException ex) {
			throw new AssertionError("rdma resource show: " + ex, ex);
		}
		Map<String, Long> counts = new TreeMap<>();
		for (String line : out.split("\n")) {
			String[] t = line.trim().split("\\s+");
			for (int i = 0; i + 1 < t.length; i++) {
				if (List.of("qp", "cm_id", "mr", "pd", "cq").contains(t[i]) && t[i + 1].matches("\\d+")) {
					counts.merge(t[i], Long.parseLong(t[i + 1]), Long::sum);
				}
			}
		}
		assertThat(counts).as("rdma resource show: " + out).containsOnlyKeys("qp", "cm_id", "mr", "pd", "cq");
		return counts;
	}

	@Test
	void outOfBandServerDropsHostileExchangesWithoutHoldingUpItsClient() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		InetSocketAddress server = new InetSocketAddress(InetAddress.getByName(two.b().ipv4()), port);
		try (ConfigurableApplicationContext serverApp = ConnectionApps.outOfBandServer(two.b(), port,
				"allowed-peers=" + two.a().ipv4(), "max-peers=2",
				"connect-timeout=" + CONNECT_TIMEOUT.toMillis() + "ms");
				ConfigurableApplicationContext clientApp = ConnectionApps.outOfBandClient(two.a(), two.b(), port)) {
			RdmaConnection serverLink = serverApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
			RdmaConnection link = clientApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
			ConnectionApps.Collector collector = clientApp.getBean(ConnectionApps.Collector.class);
			MeterRegistry meters = serverApp.getBean(MeterRegistry.class);
			step("out of band: both applications started");
			// both sides: the server lists its peer once its QP is ready, the client may
			// still be CONNECTING then (run 23: a send found it so)
			await("the well-behaved client connected",
					() -> link.state() == ConnectionState.ESTABLISHED && serverLink.peers().size() == 1);
			exchange(link, collector, 0, 20, 64);
			long objects = NativeObjects.open();
			long fds = openFds();

			// 1. an address outside allowed-peers: closed before any record
			try (Socket outsider = connect(two.b().ipv4(), server)) {
				assertThat(outsider.getInputStream().read()).as("the outsider reads the end at once").isEqualTo(-1);
			}
			await("counted", () -> rejected(meters, "NOT_ALLOWED") == 1);

			// 2. a flood of exchange connections that never write, one that trickles, one
			// of garbage, a datagram record (wrong QP type), a truncated record
			List<Socket> flood = new ArrayList<>();
			long start = System.nanoTime();
			for (int i = 0; i < 30; i++) {
				flood.add(connect(two.a().ipv4(), server));
			}
			Socket trickler = connect(two.a().ipv4(), server);
			Thread trickle = Thread.ofPlatform().daemon().start(() -> {
				try {
					for (int i = 0; i < 20; i++) {
						trickler.getOutputStream().write('0');
						Thread.sleep(200);
					}
				}
				catch (Exception ended) {
					// the server closed it
				}
			});
			Socket garbage = connect(two.a().ipv4(), server);
			garbage.getOutputStream().write("x".repeat(52).getBytes(StandardCharsets.US_ASCII));
			Socket datagram = connect(two.a().ipv4(), server);
			datagram.getOutputStream()
				.write(("0000:000011:00000022:" + "0".repeat(32) + "\0").getBytes(StandardCharsets.US_ASCII));
			Socket truncated = connect(two.a().ipv4(), server);
			truncated.getOutputStream().write("0000:0000".getBytes(StandardCharsets.US_ASCII));
			truncated.shutdownOutput();
			// each exchange's connect-timeout runs from its own connect: the bound below
			// is
			// measured from the last one (opening the 35 sockets took up to 5 s in a VM
			// on a
			// loaded host)
			long connected = System.nanoTime();
			step("out of band: flood sent in " + Duration.ofNanos(connected - start).toMillis() + " ms");

			// meanwhile the client connects anew, and its messages go through
			RdmaConnectionRegistry clientConnections = clientApp.getBean(RdmaConnectionRegistry.class);
			clientConnections.stop();
			long reconnect = System.nanoTime();
			clientConnections.start();
			await("the client connected again during the flood",
					() -> serverLink.peers().size() == 1 && link.state() == ConnectionState.ESTABLISHED);
			Duration again = Duration.ofNanos(System.nanoTime() - reconnect);
			step("out of band: the client connected again in " + again.toMillis() + " ms during the flood");
			assertThat(again).as("a well-behaved client connects during the flood within its connect-timeout")
				.isLessThan(Duration.ofSeconds(10));
			exchange(link, collector, 100, 50, 64);

			assertClosed(garbage, "garbage");
			assertClosed(datagram, "a datagram record (another QP type)");
			assertClosed(truncated, "a truncated record");
			for (Socket silent : flood) {
				assertClosed(silent, "a silent peer");
			}
			assertClosed(trickler, "a trickling peer");
			Duration dropped = Duration.ofNanos(System.nanoTime() - connected);
			step("out of band: every hostile exchange closed " + dropped.toMillis() + " ms after the last connected ("
					+ Duration.ofNanos(System.nanoTime() - start).toMillis() + " ms after the first)");
			assertThat(dropped)
				.as("every silent or trickling peer dropped within connect-timeout (and the margin) of its connect")
				.isLessThan(CONNECT_TIMEOUT.plusSeconds(4));
			trickle.join(5000);
			for (Socket s : flood) {
				s.close();
			}
			for (Socket s : List.of(trickler, garbage, datagram, truncated)) {
				s.close();
			}
			exchange(link, collector, 200, 20, 64);
			assertThat(serverLink.peers()).hasSize(1);
			await("the server's objects back to their count", () -> NativeObjects.open() == objects);
			await("the process's file descriptors back to their count", () -> openFds() <= fds);
		}
	}

	/**
	 * Out of band: clients that send a valid record, read the server's answer and never
	 * send their {@code "done"} wait side by side, each until its {@code connect-timeout}
	 * (8 s here), and a well-behaved client connects meanwhile at once. Before, the
	 * accept thread read each {@code "done"} in turn, blocking until that timeout: the
	 * second silent client got no answer for 8 s, and a well-behaved client waited behind
	 * all three (24 s).
	 */
	@Test
	void outOfBandClientsThatNeverSendDoneHoldUpNoOtherAccept() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		Duration serverTimeout = Duration.ofSeconds(8);
		InetSocketAddress server = new InetSocketAddress(InetAddress.getByName(two.b().ipv4()), port);
		try (ConfigurableApplicationContext serverApp = ConnectionApps.outOfBandServer(two.b(), port, "max-peers=8",
				"connect-timeout=" + serverTimeout.toMillis() + "ms")) {
			RdmaConnection serverLink = serverApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
			long objects = NativeObjects.open();
			try (ConfigurableApplicationContext clientApp = ConnectionApps.outOfBandClient(two.a(), two.b(), port)) {
				RdmaConnection link = clientApp.getBean(ConnectionApps.NAME, RdmaConnection.class);
				ConnectionApps.Collector collector = clientApp.getBean(ConnectionApps.Collector.class);
				await("the well-behaved client connected",
						() -> link.state() == ConnectionState.ESTABLISHED && serverLink.peers().size() == 1);
				// the client stops, so that its next connect is timed without its startup
				RdmaConnectionRegistry clientConnections = clientApp.getBean(RdmaConnectionRegistry.class);
				clientConnections.stop();
				await("the server's peer ended", () -> serverLink.peers().isEmpty());
				// a valid RC record with the client device's GID and a QPN no QP has
				byte[] record = PingpongWire.encode(new Endpoint(0, 0x11, 0x22, two.a().gid(), Endpoint.UNKNOWN_MTU));
				List<Socket> silent = new ArrayList<>();
				long first = System.nanoTime();
				for (int i = 0; i < 3; i++) {
					Socket socket = connect(two.a().ipv4(), server);
					socket.getOutputStream().write(record);
					silent.add(socket);
				}
				for (Socket socket : silent) {
					byte[] answer = socket.getInputStream().readNBytes(PingpongWire.MESSAGE_BYTES);
					assertThat(answer).as("the server's answer to each silent client, within 5 s").hasSize(52);
				}
				step("out of band: three clients answered, none sends its \"done\"");
				long reconnect = System.nanoTime();
				clientConnections.start();
				await("the well-behaved client connected again",
						() -> link.state() == ConnectionState.ESTABLISHED && serverLink.peers().size() == 1);
				Duration took = Duration.ofNanos(System.nanoTime() - reconnect);
				step("out of band: the client connected again in " + took.toMillis() + " ms, "
						+ Duration.ofNanos(System.nanoTime() - first).toMillis() + " ms after the first silent one");
				assertThat(took).as("connected within the silent clients' connect-timeout").isLessThan(serverTimeout);
				exchange(link, collector, 0, 10, 64);
				for (Socket socket : silent) {
					assertClosed(socket, "a silent client, at its connect-timeout", serverTimeout.plusSeconds(10));
					socket.close();
				}
				assertThat(Duration.ofNanos(System.nanoTime() - first)).as("the silent clients dropped")
					.isGreaterThanOrEqualTo(serverTimeout.minusSeconds(1));
				exchange(link, collector, 100, 10, 64);
				assertThat(serverLink.peers()).hasSize(1);
			}
			await("the server's objects back to their count", () -> NativeObjects.open() == objects);
		}
	}

	/**
	 * Reads until the server closed {@code socket} (its end, or a reset when the server
	 * closed it with bytes unread), within connect-timeout and a margin; nothing is sent
	 * to a hostile exchange before its end.
	 */
	private static void assertClosed(Socket socket, String what) throws Exception {
		assertClosed(socket, what, CONNECT_TIMEOUT.plusSeconds(5));
	}

	/** {@link #assertClosed(Socket, String)} within {@code within}. */
	private static void assertClosed(Socket socket, String what, Duration within) throws Exception {
		socket.setSoTimeout((int) within.toMillis());
		int read;
		try {
			read = socket.getInputStream().read();
		}
		catch (java.net.SocketException reset) {
			read = -1;
		}
		assertThat(read).as(what + ": closed by the server, nothing sent").isEqualTo(-1);
	}

	private static Socket connect(String sourceIp, InetSocketAddress server) throws Exception {
		Socket socket = new Socket();
		socket.bind(new InetSocketAddress(InetAddress.getByName(sourceIp), 0));
		socket.connect(server, 5000);
		socket.setSoTimeout(5000);
		return socket;
	}

	private static void assertRejected(Object outcome, String reason) {
		assertThat(outcome).as("a reject").isInstanceOf(ConnectionException.class);
		ConnectionException ex = (ConnectionException) outcome;
		assertThat(ex.eventType()).isEqualTo(CmEventType.REJECTED);
		String text = new String(ex.privateData(), StandardCharsets.US_ASCII);
		assertThat(text).as("the reject's private data").startsWith("rdma-spring-boot: refused: ").contains(reason);
	}

	private static void assertRefused(ConnectionApps.Events events, RdmaPeerRefusedEvent.Reason reason, String ip)
			throws InterruptedException {
		RdmaPeerRefusedEvent event = events.next(RdmaPeerRefusedEvent.class);
		assertThat(event.getReason()).isEqualTo(reason);
		assertThat(event.getPeer()).contains(ip);
	}

	private static double rejected(MeterRegistry meters, String reason) {
		return meters.get("rdma.connection.rejected")
			.tag("connection", ConnectionApps.NAME)
			.tag("reason", reason)
			.functionCounter()
			.count();
	}

	/** A CRC of every current peer's region of the server. */
	private static long checksum(RdmaConnection server) {
		CRC32 crc = new CRC32();
		List<RdmaConnection> peers = new ArrayList<>(server.peers());
		for (RdmaConnection peer : peers) {
			MemorySegment region = peer.localRegion();
			crc.update(region.toArray(ValueLayout.JAVA_BYTE));
		}
		return crc.getValue();
	}

	private static final long T0 = System.nanoTime();

	/**
	 * What the test did, and when (seconds since the class loaded), on standard output.
	 */
	private static void step(String what) {
		System.out.printf("HostilePeerDeviceTest %.1fs: %s%n", (System.nanoTime() - T0) / 1e9, what);
	}

	static long openFds() {
		String[] fds = new java.io.File("/proc/self/fd").list();
		return (fds == null) ? -1 : fds.length;
	}

}
