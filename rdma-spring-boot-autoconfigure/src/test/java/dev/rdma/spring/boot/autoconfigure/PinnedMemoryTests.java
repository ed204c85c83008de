package dev.rdma.spring.boot.autoconfigure;

import java.util.LinkedHashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.LockedMemory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * {@link PinnedMemory}: what a configuration pins (buffers times max-peers for a server,
 * the remote-access region, the rings' estimates), and its check against injected limits:
 * 8 MiB (Docker's default) and 64 KiB (older kernels' default) fail naming both numbers,
 * the driving property and the fixes; a fit close to the limit warns; unlimited and
 * CAP_IPC_LOCK pass.
 */
class PinnedMemoryTests {

	private static final LockedMemory.Limit DOCKER = new LockedMemory.Limit(8L << 20, 8L << 20, false);

	private static final LockedMemory.Limit OLD_KERNEL = new LockedMemory.Limit(64L << 10, 64L << 10, false);

	/** The sample's two-process server profile with real message sizes. */
	static RdmaProperties server(int maxPeers, String messageSize) {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.devices.nic0.name", "rxe0");
		values.put("rdma.completion-queues.cq.entries", "1024");
		values.put("rdma.connections.orders.listen", "10.0.0.2:7471");
		values.put("rdma.connections.orders.send-queue", "cq");
		values.put("rdma.connections.orders.receive-queue", "cq");
		values.put("rdma.connections.orders.max-peers", String.valueOf(maxPeers));
		values.put("rdma.connections.orders.message-size", messageSize);
		return new Binder(new MapConfigurationPropertySource(values)).bind("rdma", RdmaProperties.class).get();
	}

	@Test
	void aServerPinsItsBuffersOncePerPeerAndEachQueueItsRing() {
		PinnedMemory memory = PinnedMemory.of(server(8, "16384"));
		// 64 send + 64 receive buffers of 16 KiB = 2 MiB, rings 64*64 + 64*16 = 5120 B ->
		// 8 KiB
		assertThat(memory.parts()).hasSize(2);
		PinnedMemory.Part peer = memory.parts().get(0);
		assertThat(peer.each()).isEqualTo((2L << 20) + 8192);
		assertThat(peer.count()).isEqualTo(8);
		assertThat(peer.property()).isEqualTo("rdma.connections.orders.message-size");
		assertThat(peer.describe()).isEqualTo("connection 'orders': 64 send and 64 receive buffers of 16 KiB (1 MiB + "
				+ "1 MiB), queue-pair rings 8 KiB (estimate) = 2056 KiB per peer, 16448 KiB for 8 peers (max-peers)");
		// 1025 entries -> 2048 CQEs of 64 bytes
		PinnedMemory.Part queue = memory.parts().get(1);
		assertThat(queue.bytes()).isEqualTo(128 << 10);
		assertThat(queue.describe())
			.isEqualTo("completion queue 'cq': 1024 entries, ring 128 KiB (estimate) = 128 KiB");
		assertThat(memory.total()).isEqualTo(8 * ((2L << 20) + 8192) + (128 << 10));
		assertThat(memory.largest()).isSameAs(peer);
		assertThat(memory.bytesOf("completion queue")).containsEntry("cq", 128L << 10);
	}

	@Test
	void aClientCountsOnePeerAndTheRemoteAccessRegionDrivesWhenLargest() {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.connections.c.connect", "10.0.0.2:7471");
		values.put("rdma.connections.c.max-peers", "8");
		values.put("rdma.connections.c.receive-buffers", "16");
		values.put("rdma.connections.c.remote-access-size", "64MB");
		RdmaProperties properties = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		PinnedMemory.Part part = PinnedMemory.of(properties).parts().get(0);
		assertThat(part.count()).isEqualTo(1);
		assertThat(part.each()).isEqualTo(64 * 4096 + 16 * 4096 + (64L << 20) + 8192);
		assertThat(part.property()).isEqualTo("rdma.connections.c.remote-access-size");
		assertThat(part.detail()).contains("remote-access region 64 MiB");
	}

	@Test
	void aConfigurationOverDockersEightMegabytesFailsNamingBothNumbersThePropertyAndTheFixes() {
		PinnedMemory memory = PinnedMemory.of(server(8, "16384"));
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> memory.check(DOCKER));
		assertThat(ex).as("fails without the check: startup would succeed and every peer be rejected").isNotNull();
		assertThat(ex.property()).isEqualTo("rdma.connections.orders.message-size");
		assertThat(ex.reason())
			.startsWith("the RDMA configuration pins 16576 KiB (16973824 bytes) of locked memory, "
					+ "more than the 8388608 bytes (8 MiB, RLIMIT_MEMLOCK) this process may lock")
			.contains("16448 KiB for 8 peers (max-peers)");
		assertThat(ex.action())
			.startsWith("Raise the locked-memory limit to at least 16576 KiB or lower "
					+ "rdma.connections.orders.message-size: ")
			.contains("docker run --ulimit memlock=-1", "LimitMEMLOCK=infinity", "/etc/security/limits.conf",
					"IPC_LOCK");
		String analysis = new RdmaFailureAnalyzer().analyze(ex).getDescription();
		assertThat(analysis).contains("Property: rdma.connections.orders.message-size", "16973824 bytes",
				"8388608 bytes");
	}

	@Test
	void theDefaultsFailUnderSixtyFourKilobytes() {
		// one client with the defaults: 64 + 64 buffers of 4 KiB = 512 KiB
		Map<String, String> values = Map.of("rdma.connections.c.connect", "10.0.0.2:7471");
		PinnedMemory memory = PinnedMemory
			.of(new Binder(new MapConfigurationPropertySource(values)).bind("rdma", RdmaProperties.class).get());
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> memory.check(OLD_KERNEL));
		assertThat(ex).isNotNull();
		assertThat(ex.reason()).contains("520 KiB (532480 bytes)", "65536 bytes (64 KiB, RLIMIT_MEMLOCK)");
	}

	@Test
	void aFitWithLittleToSpareWarnsAndAnUnlimitedProcessPasses() {
		PinnedMemory memory = PinnedMemory.of(server(3, "16384"));
		// 3 * 2056 KiB + 128 KiB = 6296 KiB: fits 8 MiB with 23% to spare
		assertThat(memory.check(DOCKER)).isNull();
		PinnedMemory close = PinnedMemory.of(server(3, "20000"));
		String warning = close.check(DOCKER);
		assertThat(warning).startsWith("The RDMA configuration pins ")
			.contains("close to the 8388608 bytes (8 MiB, RLIMIT_MEMLOCK)", "less than 20% to spare",
					"--ulimit memlock=-1");
		PinnedMemory huge = PinnedMemory.of(server(1000, "1048576"));
		assertThat(huge.check(LockedMemory.Limit.UNLIMITED)).isNull();
		assertThat(huge.check(new LockedMemory.Limit(65536, 65536, true))).as("CAP_IPC_LOCK").isNull();
		assertThat(new PinnedMemory().check(OLD_KERNEL)).as("nothing configured").isNull();
	}

	@Test
	void theReportListsEachPartAndTheTotalAgainstTheLimit() {
		assertThat(PinnedMemory.of(server(1, "4096")).lines(DOCKER)).containsExactly(
				"RDMA locked memory, connection 'orders': 64 send and 64 receive buffers of 4 KiB (256 KiB + 256 KiB), "
						+ "queue-pair rings 8 KiB (estimate) = 520 KiB",
				"RDMA locked memory, completion queue 'cq': 1024 entries, ring 128 KiB (estimate) = 128 KiB",
				"RDMA locked memory: 648 KiB in total at most, limit 8388608 bytes (8 MiB, RLIMIT_MEMLOCK)");
	}

	@Test
	void aLaterKindOfRegisteredMemoryIsOnePartMore() {
		PinnedMemory memory = PinnedMemory.of(server(1, "4096"))
			.add(new PinnedMemory.Part("shared receive queue", "srq", "rdma.x.srq.buffers", 1 << 20, 1, "1 MiB"));
		assertThat(memory.total()).isEqualTo((520 << 10) + (128 << 10) + (1 << 20));
		assertThat(memory.largest().name()).isEqualTo("srq");
	}

}
