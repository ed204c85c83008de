package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NoNativeLeaks;
import dev.rdma.verbs.testing.TwoDevices;
import dev.rdma.verbs.testing.TwoDevices.Peer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

/**
 * What {@link OutOfBand#connect} and {@link OutOfBand#accept} refuse before the peer
 * commits, on the tier's first device (rxeA, RoCE): a UD queue pair, a queue pair past
 * INIT, a path MTU above the port's active MTU, a port the device does not have, an
 * explicit GID index at an empty table entry, LID addressing on RoCE. The client must not
 * open a TCP connection (a fake server that never accepts finds nothing in its backlog),
 * the server must not accept one (a waiting client gets neither an answer nor an end of
 * stream). And a peer's record without a GID is refused on RoCE naming the peer, before
 * {@code ibv_modify_qp}, without {@code "done"} (client) or an answer (server).
 */
@Tag(DeviceTestSupport.TAG)
@ExtendWith(NoNativeLeaks.class)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class OutOfBandPreconditionsDeviceTest {

	static final InetSocketAddress ANY_LOOPBACK = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);

	static final ExchangeOptions OPTIONS = ExchangeOptions.defaults()
		.withConnectTimeout(Duration.ofSeconds(2))
		.withIoTimeout(Duration.ofSeconds(2));

	/** A record the fake peers send: RoCE GID ::ffff:10.9.9.9. */
	static final Endpoint PEER = new Endpoint(0, 0x123, 0x456,
			new dev.rdma.verbs.Gid(java.util.HexFormat.of().parseHex("00000000000000000000ffff0a090909")),
			Endpoint.UNKNOWN_MTU);

	Peer a;

	@BeforeEach
	void device() {
		a = TwoDevices.require().a();
	}

	@Test
	void aUdQueuePairIsRefusedBeforeAnyTcpInBothRoles() throws Exception {
		try (PingPongSide ud = new PingPongSide(a.device(), 1024, 4, 4096, QueuePair.Type.UD)) {
			refusedInBothRoles(ud.qp, OPTIONS,
					t -> assertThat(t).isInstanceOf(IllegalStateException.class)
						.hasMessageContaining("is a UD queue pair")
						.hasMessageContaining("connect RC queue pairs"));
		}
	}

	@Test
	void aQueuePairPastInitIsRefusedBeforeAnyTcpInBothRoles() throws Exception {
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4)) {
			rc.qp.moveToError();
			refusedInBothRoles(rc.qp, OPTIONS,
					t -> assertThat(t).isInstanceOf(IllegalStateException.class)
						.hasMessageContaining("is in state ERR")
						.hasMessageContaining("from RESET or INIT"));
		}
	}

	@Test
	void aPathMtuAboveThePortsActiveMtuIsRefusedBeforeAnyTcpInBothRoles() throws Exception {
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4)) {
			int active = rc.context.queryPort(1).activeMtu();
			assertThat(active).as("active MTU of %s port 1 (netdev MTU 1500 gives 1024)", a.device()).isLessThan(4096);
			ExchangeOptions tooBig = OPTIONS.withParameters(OPTIONS.parameters().withPathMtu(active * 2));
			refusedInBothRoles(rc.qp, tooBig,
					t -> assertThat(t).isInstanceOf(IllegalArgumentException.class)
						.hasMessageContaining("pathMtu (path_mtu) " + active * 2)
						.hasMessageContaining("exceeds the active MTU " + active + " of " + a.device() + " port 1"));
			assertThat(rc.qp.state()).isEqualTo(QueuePair.State.INIT);
		}
	}

	@Test
	void aPortTheDeviceDoesNotHaveIsRefusedBeforeAnyTcpInBothRoles() throws Exception {
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4)) {
			refusedInBothRoles(rc.qp, OPTIONS.withPort(2),
					t -> assertThat(t).isInstanceOf(VerbsException.class)
						.hasMessageContaining("ibv_query_port failed: EINVAL")
						.hasMessageContaining(a.device() + " port 2"));
		}
	}

	/**
	 * rdma-core's {@code ibv_query_gid} reports an empty entry as success with an
	 * all-zero GID; announcing that GID sent the peer to an address no one has.
	 */
	@Test
	void anExplicitGidIndexAtAnEmptyEntryIsRefusedNamingTheIndexAndThePort() throws Exception {
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4);
				PingPongSide ud = new PingPongSide(a.device(), 1024, 4, 4096, QueuePair.Type.UD)) {
			int empty = emptyGidIndex(rc.context);
			ExchangeOptions atEmpty = OPTIONS.withGidIndex(empty);
			String expected = "GID index " + empty + " of " + a.device() + " port 1 is empty";
			Consumer<Throwable> named = t -> assertThat(t).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining(expected)
				.hasMessageContaining("ENODATA");
			refusedInBothRoles(rc.qp, atEmpty, named);
			named.accept(catchThrowable(() -> OutOfBand.localEndpoint(rc.qp, atEmpty)));
			named.accept(catchThrowable(() -> OutOfBand.localDatagramEndpoint(ud.qp, 0x11111111, atEmpty)));
			assertThat(rc.qp.state()).isEqualTo(QueuePair.State.INIT);
		}
	}

	/** Ethernet has no LIDs: NO_GID would announce LID 0 and GID 0. */
	@Test
	void lidAddressingOnARocePortIsRefusedNamingTheLinkLayer() throws Exception {
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4);
				PingPongSide ud = new PingPongSide(a.device(), 1024, 4, 4096, QueuePair.Type.UD)) {
			assertThat(rc.context.queryPort(1).linkLayer()).isEqualTo(PortAttributes.LinkLayer.ETHERNET);
			ExchangeOptions noGid = OPTIONS.withGidIndex(ExchangeOptions.NO_GID);
			Consumer<Throwable> named = t -> assertThat(t).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("NO_GID")
				.hasMessageContaining("the link layer of " + a.device() + " port 1 is ETHERNET");
			refusedInBothRoles(rc.qp, noGid, named);
			named.accept(catchThrowable(() -> OutOfBand.localEndpoint(rc.qp, noGid)));
			named.accept(catchThrowable(() -> OutOfBand.localDatagramEndpoint(ud.qp, 0x11111111, noGid)));
		}
	}

	/**
	 * An {@code ibv_rc_pingpong} server started without {@code -g} announces GID 0; on
	 * RoCE the client refuses it before {@code ibv_modify_qp} (which failed with a bare
	 * EINVAL) and closes without {@code "done"}, so the C server ends instead of waiting.
	 */
	@Test
	void aServerRecordWithoutGidIsRefusedOnRoceWithoutDone() throws Exception {
		Endpoint noGid = new Endpoint(0x0007, 0x123, 0x456, Endpoint.NO_GID, Endpoint.UNKNOWN_MTU);
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4);
				ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			CompletableFuture<byte[]> afterRecord = CompletableFuture.supplyAsync(() -> {
				try (Socket s = fake.accept()) {
					s.setSoTimeout(10_000);
					InputStream in = s.getInputStream();
					byte[] theirs = in.readNBytes(PingpongWire.MESSAGE_BYTES);
					assertThat(PingpongWire.decode(theirs).qpn()).isEqualTo(rc.qp.qpNum());
					s.getOutputStream().write(PingpongWire.encode(noGid));
					return in.readAllBytes();
				}
				catch (IOException e) {
					throw new RuntimeException(e);
				}
			}, OutOfBandPreconditionsDeviceTest::ownThread);
			String server = "the exchange server " + fake.getLocalSocketAddress();
			assertThatThrownBy(
					() -> OutOfBand.connect(rc.qp, (InetSocketAddress) fake.getLocalSocketAddress(), OPTIONS))
				.isInstanceOf(ExchangeException.class)
				.hasMessageContaining(server + " announced no GID")
				.hasMessageContaining("LID 0x0007, QPN 0x000123")
				.hasMessageContaining(a.device() + " port 1 is RoCE")
				.hasMessageContaining("needs -g <gid index> on RoCE");
			assertThat(afterRecord.get(30, TimeUnit.SECONDS)).as("bytes after the records: no \"done\"").isEmpty();
			assertThat(rc.qp.state()).isEqualTo(QueuePair.State.INIT);
		}
	}

	/** The same in the server role: the client gets no answer, only the end. */
	@Test
	void aClientRecordWithoutGidIsRefusedOnRoceWithoutAnAnswer() throws Exception {
		Endpoint noGid = new Endpoint(0, 0xabc, 0x456, Endpoint.NO_GID, Endpoint.UNKNOWN_MTU);
		try (PingPongSide rc = new PingPongSide(a.device(), 1024, 4);
				ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK);
				Socket client = new Socket(listener.address().getAddress(), listener.port())) {
			client.getOutputStream().write(PingpongWire.encode(noGid));
			assertThatThrownBy(() -> OutOfBand.accept(listener, rc.qp, OPTIONS)).isInstanceOf(ExchangeException.class)
				.hasMessageContaining("the exchange client " + client.getLocalSocketAddress() + " announced no GID")
				.hasMessageContaining("QPN 0x000abc")
				.hasMessageContaining("needs -g <gid index> on RoCE");
			client.setSoTimeout(10_000);
			assertThat(client.getInputStream().readAllBytes()).as("the server's answer").isEmpty();
			assertThat(rc.qp.state()).isEqualTo(QueuePair.State.INIT);
		}
	}

	/**
	 * Client role: the error, and no connection in the backlog of a server that never
	 * accepts. Server role: the error (not the accept timeout), and a client waiting in
	 * the backlog with its record sent gets neither bytes nor an end of stream.
	 */
	private static void refusedInBothRoles(QueuePair qp, ExchangeOptions options, Consumer<Throwable> error)
			throws IOException {
		try (ServerSocket fake = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
			error.accept(catchThrowable(() -> OutOfBand.connect(qp, (InetSocketAddress) fake.getLocalSocketAddress(),
					options.withIoTimeout(Duration.ofMillis(500)))));
			fake.setSoTimeout(300);
			assertThatThrownBy(fake::accept).as("a TCP connection reached the server")
				.isInstanceOf(SocketTimeoutException.class);
		}
		try (ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK);
				Socket client = new Socket(listener.address().getAddress(), listener.port())) {
			client.getOutputStream().write(PingpongWire.encode(PEER));
			error.accept(catchThrowable(() -> OutOfBand.accept(listener, qp, options)));
			client.setSoTimeout(300);
			assertThatThrownBy(() -> client.getInputStream().read())
				.as("the waiting client got an answer or an end of stream")
				.isInstanceOf(SocketTimeoutException.class);
		}
	}

	/** The first empty entry of port 1's GID table (rxe fills only the first few). */
	private static int emptyGidIndex(Context ctx) {
		int entries = Math.min(ctx.queryPort(1).gidTableLength(), OutOfBand.GID_SCAN_ENTRIES);
		for (int i = 0; i < entries; i++) {
			if (ctx.queryGid(1, i).isZero()) {
				return i;
			}
		}
		throw new AssertionError(
				"no empty entry among the first " + entries + " of " + ctx.deviceName() + " port 1's GID table");
	}

	private static void ownThread(Runnable task) {
		Thread t = new Thread(task, "OutOfBandPreconditionsDeviceTest");
		t.setDaemon(true);
		t.start();
	}

}
