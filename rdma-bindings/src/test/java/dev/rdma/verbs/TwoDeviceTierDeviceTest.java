package dev.rdma.verbs;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NativePeer;
import dev.rdma.verbs.testing.TwoDevices;
import dev.rdma.verbs.testing.TwoDevices.Peer;
import dev.rdma.verbs.testing.TwoDevices.Traffic;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The two-device tier itself (issue 15): rdma-core's own programs, C peers no one here
 * wrote, connect rxeA to rxeB across the veth pair, and each device's {@code hw_counters}
 * prove that the traffic left one device and arrived at the other (policy routing could
 * otherwise hand it to {@code lo} or to the server's own device and the programs would
 * still report success). The binding's own cross-device tests build on the same
 * {@link TwoDevices} and {@link NativePeer}.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TwoDeviceTierDeviceTest {

	private static final int ITERATIONS = 100;

	private static final int PINGPONG_PORT = 18515;

	private static final int RDMA_CM_PORT = 7471;

	@Test
	void theDevicesHaveDistinctIpv4MappedGidsOnTheirOwnNetdevs() {
		TwoDevices two = TwoDevices.require();
		assertThat(two.a().device()).isNotEqualTo(two.b().device());
		assertThat(two.a().gid().isIpv4Mapped()).isTrue();
		assertThat(two.a().gid()).hasToString("::ffff:" + two.a().ipv4());
		assertThat(two.b().gid()).hasToString("::ffff:" + two.b().ipv4());
		assertThat(two.a().gid()).isNotEqualTo(two.b().gid());
		try (Context a = Context.open(two.a().device()); Context b = Context.open(two.b().device())) {
			assertThat(a.findIpv4GidIndex(Peer.PORT)).isEqualTo(two.a().gidIndex());
			assertThat(b.findIpv4GidIndex(Peer.PORT)).isEqualTo(two.b().gidIndex());
			assertThat(a.queryGid(Peer.PORT, two.a().gidIndex())).isEqualTo(two.a().gid());
			assertThat(b.queryGid(Peer.PORT, two.b().gidIndex())).isEqualTo(two.b().gid());
		}
	}

	@Test
	void ibvRcPingpongWithCompletionEventsCrossesFromRxeAToRxeB() {
		TwoDevices two = TwoDevices.require();
		Peer a = two.a();
		Peer b = two.b();
		Traffic a0 = a.traffic();
		Traffic b0 = b.traffic();
		String port = Integer.toString(PINGPONG_PORT);
		try (NativePeer server = NativePeer.start("ibv_rc_pingpong", "-d", b.device(), "-g",
				Integer.toString(b.gidIndex()), "-e", "-n", Integer.toString(ITERATIONS), "-p", port)) {
			// connecting before the server listens fails (its stdout is a pipe, fully
			// buffered: its "local
			// address" line shows only at exit, so the listening socket is the signal)
			NativePeer.awaitTcpListening(PINGPONG_PORT, Duration.ofSeconds(60));
			try (NativePeer client = NativePeer.start("ibv_rc_pingpong", "-d", a.device(), "-g",
					Integer.toString(a.gidIndex()), "-e", "-n", Integer.toString(ITERATIONS), "-p", port, b.ipv4())) {
				assertThat(client.awaitExit(Duration.ofSeconds(180)))
					.as("client exit status; output:%n%s", client.output())
					.isZero();
				assertThat(server.awaitExit(Duration.ofSeconds(60)))
					.as("server exit status; output:%n%s", server.output())
					.isZero();
				System.out.printf("ibv_rc_pingpong server on %s:%n%s%nclient on %s:%n%s%n", b, server.output(), a,
						client.output());
				assertThat(client.output()).contains(ITERATIONS + " iters in")
					.containsPattern("remote address: .*GID " + b.gid());
				assertThat(server.output()).contains(ITERATIONS + " iters in")
					.containsPattern("remote address: .*GID " + a.gid());
			}
		}
		TwoDevices.assertCrossed(a, a0, b, b0, ITERATIONS);
	}

	@Test
	void rdmaServerOnRxeBAndRdmaClientOnRxeAExchangeAMessageEachWay() {
		TwoDevices two = TwoDevices.require();
		Peer a = two.a();
		Peer b = two.b();
		Traffic a0 = a.traffic();
		Traffic b0 = b.traffic();
		String port = Integer.toString(RDMA_CM_PORT);
		// rdma_client of rdma-core 44 has no source-address option: the policy rules
		// route its unbound id
		// to 10.0.0.2 through vethA, and the counters below prove that it left from rxeA
		try (NativePeer server = NativePeer.start("rdma_server", "-s", b.ipv4(), "-p", port)) {
			NativePeer.awaitRdmaCmListening(b.device(), RDMA_CM_PORT, Duration.ofSeconds(60));
			try (NativePeer client = NativePeer.start("rdma_client", "-s", b.ipv4(), "-p", port)) {
				assertThat(client.awaitExit(Duration.ofSeconds(120)))
					.as("client exit status; output:%n%s", client.output())
					.isZero();
				assertThat(server.awaitExit(Duration.ofSeconds(60)))
					.as("server exit status; output:%n%s", server.output())
					.isZero();
				System.out.printf("rdma_server on %s:%n%s%nrdma_client:%n%s%n", b, server.output(), client.output());
				assertThat(client.output()).contains("rdma_client: end 0");
				assertThat(server.output()).contains("rdma_server: end 0");
			}
		}
		TwoDevices.assertCrossed(a, a0, b, b0, 1);
	}

}
