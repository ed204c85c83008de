package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

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

}
