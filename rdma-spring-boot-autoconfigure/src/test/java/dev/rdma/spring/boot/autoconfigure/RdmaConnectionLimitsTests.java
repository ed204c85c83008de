package dev.rdma.spring.boot.autoconfigure;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.DeviceAttributes;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.PortAttributes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatNoException;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * {@link RdmaConnectionLimits} against a device described here (max_qp_wr 16384,
 * max_qp_rd_atom 128, max_qp_init_rd_atom 64, one port, a GID table of 16 entries with
 * GIDs at 0 and 1): each limit fails naming the full property, the value, the limit and
 * where it comes from; values within the limits pass; only the connections of the device
 * being opened are checked.
 */
class RdmaConnectionLimitsTests {

	private static final String C = "rdma.connections.orders.";

	/**
	 * A device like rxe0 in the test VM, recording the ports and GIDs it is asked for.
	 */
	static final class FakeDevice implements RdmaConnectionLimits.DeviceView {

		final List<String> queries = new ArrayList<>();

		@Override
		public String name() {
			return "rxe0";
		}

		@Override
		public DeviceAttributes attributes() {
			return new DeviceAttributes("1.0", 1, 2, -1, DeviceAttributes.RXE_VENDOR_ID, 0, 0, 65536, 16384, 0, 32,
					16384, 65535, 1024, 1024, 1024, 1, 0, 0, 0, 128, 64);
		}

		@Override
		public PortAttributes port(int port) {
			queries.add("port " + port);
			return new PortAttributes(PortAttributes.PortState.ACTIVE, 4096, 1024, 16, 0,
					PortAttributes.LinkLayer.ETHERNET, 1, 1, 5, 0);
		}

		@Override
		public @Nullable Gid gid(int port, int index) {
			queries.add("gid " + port + "/" + index);
			byte[] raw = new byte[16];
			raw[15] = (byte) (index + 1);
			return index < 2 ? new Gid(raw) : null;
		}

	}

	private static RdmaProperties properties(String... connection) {
		Map<String, String> values = new LinkedHashMap<>();
		List<String> all = new ArrayList<>(List.of("rdma.devices.nic0.name=rxe0", "rdma.devices.nic1.name=rxe1",
				"rdma.completion-queues.tx.entries=256", "rdma.completion-queues.tx.device=nic0",
				"rdma.completion-queues.rx.entries=256", "rdma.completion-queues.rx.device=nic0",
				"rdma.completion-queues.tx1.entries=256", "rdma.completion-queues.tx1.device=nic1",
				"rdma.completion-queues.rx1.entries=256", "rdma.completion-queues.rx1.device=nic1",
				C + "connect=10.0.0.2:7471", C + "send-queue=tx", C + "receive-queue=rx"));
		all.addAll(List.of(connection));
		for (String property : all) {
			int eq = property.indexOf('=');
			values.put(property.substring(0, eq), property.substring(eq + 1));
		}
		return new Binder(new MapConfigurationPropertySource(values)).bind("rdma", RdmaProperties.class).get();
	}

	private static RdmaConfigurationException failure(RdmaProperties properties, FakeDevice device) {
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> RdmaConnectionLimits.check(properties, "nic0", device));
		assertThat(ex).as("a RdmaConfigurationException").isNotNull();
		return ex;
	}

	/**
	 * One limit exceeded: {@code failing} (with {@code others} of the connection) fails
	 * naming the property, with {@code message} after it and {@code action} (a prefix
	 * when it ends with "..."), after the device was asked for {@code queries}.
	 */
	static Arguments limit(String failing, List<String> others, String message, String action, List<String> queries) {
		return Arguments.of(failing, others, message, action, queries);
	}

	static Stream<Arguments> limitsExceeded() {
		String byOutOfBand = "exchange=out-of-band";
		return Stream.of(
				limit("send-depth=16384", List.of(),
						" exceeds max_qp_wr 16384 of device rxe0 less the send queue's slot for the close marker "
								+ "(ibv_query_device)",
						"Set " + C + "send-depth to at most 16383.", List.of()),
				limit("receive-depth=1048576", List.of(), " exceeds max_qp_wr 16384 of device rxe0 (ibv_query_device)",
						"Set " + C + "receive-depth to at most 16384.", List.of()),
				limit("cm.responder-resources=129", List.of(),
						" exceeds max_qp_rd_atom 128 of device rxe0 (ibv_query_device)",
						"Set " + C + "cm.responder-resources to at most 128, or to 255 for the device's maximum.",
						List.of()),
				limit("cm.initiator-depth=65", List.of(byOutOfBand),
						" exceeds max_qp_init_rd_atom 64 of device rxe0 (ibv_query_device)",
						"Set " + C + "cm.initiator-depth to at most 64...", List.of()),
				limit("out-of-band.port=2", List.of(byOutOfBand),
						" exceeds the 1 port(s) of device rxe0 (phys_port_cnt, ibv_query_device)",
						"Set " + C + "out-of-band.port between 1 and 1.", List.of()),
				limit("out-of-band.path-mtu=2048", List.of(byOutOfBand),
						" exceeds the active MTU 1024 of port 1 of device rxe0 (active_mtu, ibv_query_port)",
						"Set " + C + "out-of-band.path-mtu to at most 1024...", List.of("port 1")),
				limit("out-of-band.gid-index=16", List.of(byOutOfBand),
						" is beyond the GID table of port 1 of device rxe0 (gid_tbl_len 16, ibv_query_port)",
						"Set " + C + "out-of-band.gid-index between 0 and 15, or remove...", List.of("port 1")),
				limit("out-of-band.gid-index=5", List.of(byOutOfBand),
						" names an empty entry of the GID table of port 1 of device rxe0 (ibv_query_gid)", "...",
						List.of("port 1", "gid 1/5")));
	}

	@ParameterizedTest(name = "[{index}] {0}")
	@MethodSource("limitsExceeded")
	void aLimitExceededNamesThePropertyTheValueTheLimitAndItsSource(String failing, List<String> others, String message,
			String action, List<String> queries) {
		FakeDevice device = new FakeDevice();
		List<String> connection = new ArrayList<>();
		others.forEach(o -> connection.add(C + o));
		connection.add(C + failing);
		RdmaConfigurationException ex = failure(properties(connection.toArray(String[]::new)), device);
		assertThat(ex.property()).isEqualTo(C + failing.substring(0, failing.indexOf('=')));
		assertThat(ex.getMessage()).isEqualTo(C + failing + message);
		if (action.endsWith("...")) {
			assertThat(ex.action()).startsWith(action.substring(0, action.length() - 3));
		}
		else {
			assertThat(ex.action()).isEqualTo(action);
		}
		assertThat(device.queries).containsExactlyElementsOf(queries);
	}

	/**
	 * The send queue holds send-depth + 1 work requests (the close's marker): send-depth
	 * reaches max_qp_wr - 1, receive-depth max_qp_wr.
	 */
	@Test
	void depthsAtTheirLimitsPass() {
		FakeDevice device = new FakeDevice();
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits
			.check(properties(C + "send-depth=16383", C + "receive-depth=16384"), "nic0", device));
		assertThat(device.queries).as("an rdma_cm connection asks for no port nor GID").isEmpty();
	}

	@Test
	void readAtomicDepthsAtTheLimitOrTheDeviceMaximumPass() {
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits.check(
				properties(C + "cm.responder-resources=128", C + "cm.initiator-depth=64"), "nic0", new FakeDevice()));
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits.check(
				properties(C + "cm.responder-resources=255", C + "cm.initiator-depth=255"), "nic0", new FakeDevice()));
	}

	@Test
	void outOfBandPathMtuAtOrBelowThePortsActiveMtuPasses() {
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits
			.check(properties(C + "exchange=out-of-band", C + "out-of-band.path-mtu=1024"), "nic0", new FakeDevice()));
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits
			.check(properties(C + "exchange=out-of-band", C + "out-of-band.path-mtu=512"), "nic0", new FakeDevice()));
	}

	@Test
	void outOfBandWithAGidOrWithoutAnIndexPasses() {
		FakeDevice device = new FakeDevice();
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits
			.check(properties(C + "exchange=out-of-band", C + "out-of-band.gid-index=1"), "nic0", device));
		assertThat(device.queries).containsExactly("port 1", "gid 1/1");
		FakeDevice found = new FakeDevice();
		assertThatNoException()
			.isThrownBy(() -> RdmaConnectionLimits.check(properties(C + "exchange=out-of-band"), "nic0", found));
		assertThat(found.queries).as("the GID is found by type at each attempt").isEmpty();
	}

	@Test
	void onlyTheConnectionsOfTheOpenedDeviceAreChecked() {
		RdmaProperties properties = properties(C + "send-queue=tx1", C + "receive-queue=rx1", C + "send-depth=20000");
		assertThatNoException().isThrownBy(() -> RdmaConnectionLimits.check(properties, "nic0", new FakeDevice()));
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> RdmaConnectionLimits.check(properties, "nic1", new FakeDevice()));
		assertThat(ex).isNotNull();
		assertThat(ex.property()).isEqualTo(C + "send-depth");
	}

}
