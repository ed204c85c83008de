package dev.rdma.verbs.exchange;

import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.ReceiveWorkRequest;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.AddressHandle;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletionSnapshot;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NoNativeLeaks;
import dev.rdma.verbs.testing.NativePeer;
import dev.rdma.verbs.testing.TwoDevices;
import dev.rdma.verbs.testing.TwoDevices.Peer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The out-of-band exchange across the two devices of the tier (rxeA on vethA, rxeB on
 * vethB): Java to Java over RC with every opcode and over UD, and Java against
 * rdma-core's {@code ibv_rc_pingpong} in both roles. Each test proves through both
 * devices' {@code hw_counters} (and the GIDs the peers announced) that the traffic went
 * from one device to the other, and that no native object is left open.
 */
@Tag(DeviceTestSupport.TAG)
@ExtendWith(NoNativeLeaks.class)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class OutOfBandDeviceTest {

	static final int SLOT = 4096;

	static final int ITERATIONS = 300;

	static final int PINGPONG_PORT = ExchangeOptions.PINGPONG_TCP_PORT + 7;

	static final Duration STEP = Duration.ofSeconds(60);

	TwoDevices two;

	@BeforeEach
	void devices() {
		two = TwoDevices.require();
	}

	static InetSocketAddress address(Peer peer, int port) {
		try {
			return new InetSocketAddress(InetAddress.getByName(peer.ipv4()), port);
		}
		catch (UnknownHostException e) {
			throw new AssertionError(e);
		}
	}

	static ExchangeOptions options() {
		return ExchangeOptions.defaults().withConnectTimeout(STEP).withIoTimeout(STEP);
	}

	@Test
	void javaToJavaOverRcWithEveryOpcodeFromRxeAToRxeB() throws Exception {
		Peer a = two.a();
		Peer b = two.b();
		TwoDevices.Marks m0 = two.mark();
		try (PingPongSide client = new PingPongSide(a.device(), SLOT, 4, 5L * SLOT, QueuePair.Type.RC);
				PingPongSide server = new PingPongSide(b.device(), SLOT, 4, 5L * SLOT, QueuePair.Type.RC);
				ExchangeListener listener = ExchangeListener.bind(address(b, 0))) {
			assertThat(OutOfBand.findGidIndex(client.context, 1)).as("GID index of %s found by type", a)
				.isEqualTo(a.gidIndex());
			assertThat(OutOfBand.findGidIndex(server.context, 1)).as("GID index of %s found by type", b)
				.isEqualTo(b.gidIndex());
			// the server's receives: SEND into slot 0, SEND_WITH_IMM into slot 1,
			// WRITE_WITH_IMM consumes one
			server.qp.postRecv(new ReceiveWorkRequest().wrId(10).buffer(server.mr, 0, SLOT));
			server.qp.postRecv(new ReceiveWorkRequest().wrId(11).buffer(server.mr, SLOT, SLOT));
			server.qp.postRecv(new ReceiveWorkRequest().wrId(12).buffer(server.mr, 0, 0));
			fill(server, 4L * SLOT, SLOT, 40); // what the client reads
			for (int i = 0; i < 4; i++) {
				fill(client, (long) i * SLOT, SLOT, 10 * i + 1);
			}
			CompletableFuture<Endpoint> accepted = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, server.qp, options()));
			Endpoint serverSeen = OutOfBand.connect(client.qp, listener.address(), options());
			Endpoint clientSeen = accepted.get(60, TimeUnit.SECONDS);
			assertThat(serverSeen.qpn()).isEqualTo(server.qp.qpNum());
			assertThat(serverSeen.gid()).isEqualTo(b.gid());
			assertThat(clientSeen.qpn()).isEqualTo(client.qp.qpNum());
			assertThat(clientSeen.gid()).isEqualTo(a.gid());
			assertThat(client.qp.state()).isEqualTo(QueuePair.State.RTS);
			assertThat(server.qp.state()).isEqualTo(QueuePair.State.RTS);

			long remote = server.mr.bufferAddress();
			int rkey = server.mr.rkey();
			client.qp.postSend(new SendWorkRequest().wrId(20).buffer(client.mr, 0, 1000));
			client.qp.postSend(new SendWorkRequest().wrId(21)
				.buffer(client.mr, SLOT, 2000)
				.opcode(SendOpcode.SEND_WITH_IMM)
				.immediateData(0xCAFE0015));
			client.qp.postSend(new SendWorkRequest().wrId(22)
				.buffer(client.mr, 2L * SLOT, SLOT)
				.opcode(SendOpcode.RDMA_WRITE)
				.remote(remote + 2L * SLOT, rkey));
			client.qp.postSend(new SendWorkRequest().wrId(23)
				.buffer(client.mr, 3L * SLOT, 3000)
				.opcode(SendOpcode.RDMA_WRITE_WITH_IMM)
				.immediateData(0xCAFE0016)
				.remote(remote + 3L * SLOT, rkey));
			client.qp.postSend(new SendWorkRequest().wrId(24)
				.buffer(client.mr, 0, SLOT)
				.opcode(SendOpcode.RDMA_READ)
				.remote(remote + 4L * SLOT, rkey));

			List<WorkCompletionSnapshot> sends = completions(client, 5, "the client's 5 send completions");
			assertThat(sends).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
			assertThat(sends).extracting(WorkCompletionSnapshot::wrId).containsExactly(20L, 21L, 22L, 23L, 24L);
			assertThat(sends).extracting(WorkCompletionSnapshot::opcode)
				.containsExactly(WcOpcode.SEND, WcOpcode.SEND, WcOpcode.RDMA_WRITE, WcOpcode.RDMA_WRITE,
						WcOpcode.RDMA_READ);
			List<WorkCompletionSnapshot> recvs = completions(server, 3, "the server's 3 receive completions");
			assertThat(recvs).allSatisfy(wc -> {
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.qpNum()).isEqualTo(server.qp.qpNum());
			});
			assertThat(recvs).extracting(WorkCompletionSnapshot::wrId).containsExactly(10L, 11L, 12L);
			assertThat(recvs).extracting(WorkCompletionSnapshot::opcode)
				.containsExactly(WcOpcode.RECV, WcOpcode.RECV, WcOpcode.RECV_RDMA_WITH_IMM);
			assertThat(recvs).extracting(WorkCompletionSnapshot::byteLen).containsExactly(1000, 2000, 3000);
			assertThat(recvs.get(1).immData()).isEqualTo(0xCAFE0015);
			assertThat(recvs.get(2).immData()).isEqualTo(0xCAFE0016);
			// the bytes arrived where each opcode put them, and the read brought the
			// server's
			assertThat(bytes(server, 0, 1000)).isEqualTo(expected(1000, 1));
			assertThat(bytes(server, SLOT, 2000)).isEqualTo(expected(2000, 11));
			assertThat(bytes(server, 2L * SLOT, SLOT)).isEqualTo(expected(SLOT, 21));
			assertThat(bytes(server, 3L * SLOT, 3000)).isEqualTo(expected(3000, 31));
			assertThat(bytes(client, 0, SLOT)).isEqualTo(expected(SLOT, 40));
		}
		m0.assertCrossed(5);
	}

	@Test
	void javaToJavaOverUdFromRxeAToRxeBAndBack() throws Exception {
		Peer a = two.a();
		Peer b = two.b();
		int qkeyA = 0x11111111;
		int qkeyB = 0x22222222;
		TwoDevices.Marks m0 = two.mark();
		try (PingPongSide client = new PingPongSide(a.device(), 1024, 4, 4L * 1024 + 128, QueuePair.Type.UD);
				PingPongSide server = new PingPongSide(b.device(), 1024, 4, 4L * 1024 + 128, QueuePair.Type.UD);
				ExchangeListener listener = ExchangeListener.bind(address(b, 0))) {
			client.qp.activate(1, qkeyA);
			server.qp.activate(1, qkeyB);
			client.qp.postRecv(new ReceiveWorkRequest().wrId(30).buffer(client.mr, 0, 1024 + QueuePair.GRH_BYTES));
			server.qp.postRecv(new ReceiveWorkRequest().wrId(31).buffer(server.mr, 0, 1024 + QueuePair.GRH_BYTES));
			DatagramEndpoint serverLocal = OutOfBand.localDatagramEndpoint(server.qp, qkeyB, options());
			DatagramEndpoint clientLocal = OutOfBand.localDatagramEndpoint(client.qp, qkeyA, options());
			assertThat(serverLocal.gid()).isEqualTo(b.gid());
			CompletableFuture<DatagramEndpoint> accepted = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, serverLocal, options()));
			DatagramEndpoint toServer = OutOfBand.exchange(clientLocal, listener.address(), options());
			DatagramEndpoint toClient = accepted.get(60, TimeUnit.SECONDS);
			assertThat(toServer).isEqualTo(serverLocal);
			assertThat(toClient).isEqualTo(clientLocal);

			AddressHandle ahA = client.pd.createAddressHandle(toServer.addressFrom(1, a.gidIndex()));
			AddressHandle ahB = server.pd.createAddressHandle(toClient.addressFrom(1, b.gidIndex()));
			assertThat(ahA.attributes().global()).isTrue();
			fill(client, 2048, 700, 3);
			fill(server, 2048, 800, 4);
			client.qp.postSend(new SendWorkRequest().wrId(40)
				.buffer(client.mr, 2048, 700)
				.opcode(SendOpcode.SEND_WITH_IMM)
				.immediateData(0xDA7A0001)
				.datagram(ahA, toServer.qpn(), toServer.qkey()));
			WorkCompletionSnapshot atB = completions(server, 1, "the datagram at rxeB").getFirst();
			server.qp.postSend(new SendWorkRequest().wrId(41)
				.buffer(server.mr, 2048, 800)
				.opcode(SendOpcode.SEND_WITH_IMM)
				.immediateData(0xDA7A0002)
				.datagram(ahB, toClient.qpn(), toClient.qkey()));
			List<WorkCompletionSnapshot> atA = completions(client, 2, "the send and the datagram at rxeA");
			WorkCompletionSnapshot recvA = atA.stream().filter(wc -> wc.wrId() == 30).findFirst().orElseThrow();
			for (WorkCompletionSnapshot wc : List.of(atB, recvA)) {
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.opcode()).isEqualTo(WcOpcode.RECV);
			}
			assertThat(atB.srcQp()).isEqualTo(client.qp.qpNum());
			assertThat(atB.immData()).isEqualTo(0xDA7A0001);
			assertThat(atB.byteLen()).isEqualTo(700 + QueuePair.GRH_BYTES);
			assertThat(recvA.srcQp()).isEqualTo(server.qp.qpNum());
			assertThat(recvA.immData()).isEqualTo(0xDA7A0002);
			assertThat(bytes(server, QueuePair.GRH_BYTES, 700)).isEqualTo(expected(700, 3));
			assertThat(bytes(client, QueuePair.GRH_BYTES, 800)).isEqualTo(expected(800, 4));
			// RoCE v2 over IPv4: the IPv4 header in the GRH's last 20 bytes names the
			// sender's address
			assertThat(ipv4Source(server)).isEqualTo(a.ipv4());
			assertThat(ipv4Source(client)).isEqualTo(b.ipv4());
		}
		m0.assertCrossed(1);
	}

	@Test
	void theBindingAsIbvRcPingpongServerWithTheCClient() throws Exception {
		Peer a = two.a();
		Peer b = two.b();
		TwoDevices.Marks m0 = two.mark();
		try (PingPongSide server = new PingPongSide(b.device(), SLOT, 500);
				ExchangeListener listener = ExchangeListener.bind(address(b, PINGPONG_PORT))) {
			server.postReceives();
			try (NativePeer client = NativePeer.ibvRcPingpong(a, ITERATIONS, PINGPONG_PORT, b.ipv4())) {
				Endpoint peer = OutOfBand.accept(listener, server.qp, options());
				assertThat(peer.gid()).isEqualTo(a.gid());
				int events;
				try {
					events = server.run(ITERATIONS, false, STEP);
				}
				catch (AssertionError e) {
					throw new AssertionError(e.getMessage() + "; ibv_rc_pingpong client output:\n" + client.output(),
							e);
				}
				client.assertExitsZero(STEP, "client");
				System.out.printf("binding server on %s, %d completion events; ibv_rc_pingpong client on %s:%n%s%n", b,
						events, a, client.output());
				assertThat(client.output()).contains(ITERATIONS + " iters in")
					.containsPattern("remote address: .*QPN 0x0*" + Integer.toHexString(server.qp.qpNum()) + ",.*GID "
							+ b.gid());
				assertThat(events).isPositive();
			}
		}
		m0.assertCrossed(ITERATIONS);
	}

	@Test
	void theBindingAsIbvRcPingpongClientOfTheCServer() {
		Peer a = two.a();
		Peer b = two.b();
		TwoDevices.Marks m0 = two.mark();
		try (NativePeer server = NativePeer.ibvRcPingpong(b, ITERATIONS, PINGPONG_PORT);
				PingPongSide client = new PingPongSide(a.device(), SLOT, 500)) {
			// it listens after creating its QP (its stdout is a pipe: buffered until
			// exit)
			NativePeer.awaitTcpListening(PINGPONG_PORT, STEP);
			client.postReceives();
			Endpoint peer = OutOfBand.connect(client.qp, address(b, PINGPONG_PORT), options());
			assertThat(peer.gid()).isEqualTo(b.gid());
			int events;
			try {
				events = client.run(ITERATIONS, true, STEP);
			}
			catch (AssertionError e) {
				throw new AssertionError(e.getMessage() + "; ibv_rc_pingpong server output:\n" + server.output(), e);
			}
			server.assertExitsZero(STEP, "server");
			System.out.printf("binding client on %s, %d completion events; ibv_rc_pingpong server on %s:%n%s%n", a,
					events, b, server.output());
			assertThat(server.output()).contains(ITERATIONS + " iters in")
				.containsPattern(
						"remote address: .*QPN 0x0*" + Integer.toHexString(client.qp.qpNum()) + ",.*GID " + a.gid());
			assertThat(events).isPositive();
		}
		m0.assertCrossed(ITERATIONS);
	}

	private static String ipv4Source(PingPongSide side) {
		byte[] grh = bytes(side, 0, QueuePair.GRH_BYTES);
		return (grh[32] & 0xff) + "." + (grh[33] & 0xff) + "." + (grh[34] & 0xff) + "." + (grh[35] & 0xff);
	}

	private static List<WorkCompletionSnapshot> completions(PingPongSide side, int n, String what) {
		List<WorkCompletionSnapshot> out = new ArrayList<>();
		DeviceTestSupport.await(STEP, () -> {
			side.cq.poll(side.buffer, wc -> out.add(wc.copy()));
			return out.size() >= n;
		}, what);
		return out;
	}

	private static void fill(PingPongSide side, long offset, int length, int seed) {
		byte[] data = expected(length, seed);
		for (int i = 0; i < length; i++) {
			side.mr.buffer().set(JAVA_BYTE, offset + i, data[i]);
		}
	}

	private static byte[] expected(int length, int seed) {
		byte[] data = new byte[length];
		for (int i = 0; i < length; i++) {
			data[i] = (byte) (seed + i * 7);
		}
		return data;
	}

	private static byte[] bytes(PingPongSide side, long offset, int length) {
		return side.mr.buffer().asSlice(offset, length).toArray(JAVA_BYTE);
	}

}
