package dev.rdma.spring.boot.autoconfigure;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.CpuAffinity;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * {@link PollerPlacement}: the devices' NUMA node and local CPUs from sysfs ("unknown"
 * without them, as on rxe), {@code rdma.pollers.<group>.cpus} refused when it is not a
 * CPU list or names CPUs the process may not use, and the warning about a group pinned
 * off its device's node.
 */
class PollerPlacementTests {

	private static final String P = "rdma.pollers.conns.cpus";

	@Test
	void aDeviceWithoutSysfsPlacementIsUnknown(@TempDir Path dir) throws Exception {
		assertThat(PollerPlacement.deviceNode(dir.resolve("rxe0/device"), "rxe0").describe())
			.isEqualTo("NUMA node unknown, local CPUs unknown");
		Path pci = dir.resolve("mlx5_0/device");
		Files.createDirectories(pci);
		Files.writeString(pci.resolve("numa_node"), "1\n");
		Files.writeString(pci.resolve("local_cpulist"), "8-15,24-31\n");
		assertThat(PollerPlacement.deviceNode(pci, "mlx5_0").describe())
			.isEqualTo("NUMA node 1, local CPUs 8-15,24-31");
		// a node of -1 (no NUMA) is unknown too
		Files.writeString(pci.resolve("numa_node"), "-1\n");
		assertThat(PollerPlacement.deviceNode(pci, "mlx5_0").numaNode()).isEqualTo(-1);
	}

	@Test
	void aBadCpuListFailsNamingTheProperty() {
		BitSet allowed = CpuAffinity.parse("0-1");
		RdmaConfigurationException syntax = catchThrowableOfType(RdmaConfigurationException.class,
				() -> PollerPlacement.validateCpus(P, "0-x", allowed));
		assertThat(syntax.property()).isEqualTo(P);
		assertThat(syntax.reason())
			.isEqualTo(P + "=0-x is not a Linux CPU list: '0-x' is not a CPU number or a range a-b");
		assertThat(syntax.action()).contains("0-3,6");
		RdmaConfigurationException outside = catchThrowableOfType(RdmaConfigurationException.class,
				() -> PollerPlacement.validateCpus(P, "1-3", allowed));
		assertThat(outside.reason())
			.isEqualTo(P + "=1-3 names CPUs 2-3 this process may not run on (Cpus_allowed_list 0-1)");
		PollerPlacement.validateCpus(P, "1", allowed);
		PollerPlacement.validateCpus(P, null, allowed);
		PollerPlacement.validateCpus(P, "5", null);
	}

	@Test
	void theValidatorChecksTheCpusOfEveryGroup() {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.pollers.conns.cpus", "2-1");
		RdmaProperties properties = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		RdmaConfigurationException ex = catchThrowableOfType(RdmaConfigurationException.class,
				() -> RdmaPropertiesValidator.validate(properties, name -> false));
		assertThat(ex.property()).isEqualTo(P);
		assertThat(properties.getPollers().get("conns").toSettings().cpus()).isEqualTo("2-1");
	}

	@Test
	void aGroupPinnedOffItsDevicesNodeIsWarnedAbout() {
		Map<String, String> values = new LinkedHashMap<>();
		values.put("rdma.devices.nic0.name", "mlx5_0");
		values.put("rdma.pollers.conns.cpus", "0-3");
		values.put("rdma.completion-queues.rx.poller", "conns");
		RdmaProperties properties = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		Map<String, PollerPlacement.DeviceNode> far = Map.of("nic0",
				new PollerPlacement.DeviceNode("mlx5_0", 1, CpuAffinity.parse("2-5")));
		assertThat(PollerPlacement.warnings(properties, far)).containsExactly("Poller group 'conns' is pinned to CPUs "
				+ "0-3 (rdma.pollers.conns.cpus), but queue 'rx' is on device mlx5_0 of NUMA node 1, whose CPUs are 2-5: "
				+ "CPUs 0-1 reach it across the interconnect");
		Map<String, PollerPlacement.DeviceNode> near = Map.of("nic0",
				new PollerPlacement.DeviceNode("mlx5_0", 0, CpuAffinity.parse("0-7")));
		assertThat(PollerPlacement.warnings(properties, near)).isEmpty();
		Map<String, PollerPlacement.DeviceNode> unknown = Map.of("nic0",
				new PollerPlacement.DeviceNode("rxe0", -1, null));
		assertThat(PollerPlacement.warnings(properties, unknown)).isEmpty();
	}

}
