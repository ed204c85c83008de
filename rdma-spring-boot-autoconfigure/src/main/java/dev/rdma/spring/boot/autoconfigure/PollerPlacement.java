package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.CpuAffinity;

/**
 * Where devices and poller threads sit: each device's NUMA node and local CPUs (sysfs
 * {@code /sys/class/infiniband/<device>/device/numa_node} and {@code local_cpulist};
 * Soft-RoCE devices have neither: "unknown"), the check of
 * {@code rdma.pollers.<group>.cpus} (a Linux CPU list, each CPU one this process may run
 * on: {@code Cpus_allowed_list} of {@code /proc/self/status}) and the warning about a
 * group pinned off the node of one of its queues' devices. Plain file reads; stateless.
 */
final class PollerPlacement {

	private static final Path SYS_INFINIBAND = Path.of("/sys/class/infiniband");

	private PollerPlacement() {
	}

	/**
	 * A device's place.
	 *
	 * @param numaNode its NUMA node, -1 when unknown
	 * @param localCpus the CPUs of that node, null when unknown
	 */
	record DeviceNode(String device, int numaNode, @Nullable BitSet localCpus) {

		String describe() {
			return "NUMA node " + (numaNode < 0 ? "unknown" : String.valueOf(numaNode)) + ", local CPUs "
					+ (localCpus == null ? "unknown" : CpuAffinity.format(localCpus));
		}

	}

	/** The place of RDMA device {@code name}, from sysfs. */
	static DeviceNode deviceNode(String name) {
		return deviceNode(SYS_INFINIBAND.resolve(name).resolve("device"), name);
	}

	static DeviceNode deviceNode(Path device, String name) {
		int node = -1;
		BitSet cpus = null;
		try {
			node = Integer.parseInt(Files.readString(device.resolve("numa_node")).trim());
		}
		catch (IOException | RuntimeException ex) {
			// no PCI parent (rxe): unknown
		}
		try {
			String list = Files.readString(device.resolve("local_cpulist")).trim();
			cpus = list.isEmpty() ? null : CpuAffinity.parse(list);
		}
		catch (IOException | RuntimeException ex) {
			// unknown
		}
		return new DeviceNode(name, node < 0 ? -1 : node, cpus);
	}

	/** The CPUs this process may run on, null when /proc does not say. */
	static @Nullable BitSet allowedCpus() {
		try {
			for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
				if (line.startsWith("Cpus_allowed_list:")) {
					return CpuAffinity.parse(line.substring("Cpus_allowed_list:".length()).trim());
				}
			}
		}
		catch (IOException | RuntimeException ex) {
			// unknown: not checked
		}
		return null;
	}

	/** Checks {@code rdma.pollers.<group>.cpus} against this process's CPUs. */
	static void validateCpus(String property, @Nullable String cpus) {
		validateCpus(property, cpus, allowedCpus());
	}

	static void validateCpus(String property, @Nullable String cpus, @Nullable BitSet allowed) {
		if (cpus == null) {
			return;
		}
		BitSet set;
		try {
			set = CpuAffinity.parse(cpus);
		}
		catch (IllegalArgumentException ex) {
			throw new RdmaConfigurationException(property,
					property + "=" + cpus + " is not a Linux CPU list: " + ex.getMessage(),
					"Set " + property + " to CPU numbers and ranges such as 0-3,6 (see lscpu, and the device's local "
							+ "CPUs in the startup report), or remove it to leave the threads unpinned.");
		}
		if (allowed != null) {
			BitSet outside = (BitSet) set.clone();
			outside.andNot(allowed);
			if (!outside.isEmpty()) {
				throw new RdmaConfigurationException(property,
						property + "=" + cpus + " names CPUs " + CpuAffinity.format(outside)
								+ " this process may not run on (Cpus_allowed_list " + CpuAffinity.format(allowed)
								+ ")",
						"Set " + property + " to CPUs among " + CpuAffinity.format(allowed)
								+ " (a container's cpuset, taskset or systemd CPUAffinity limit them).");
			}
		}
	}

	/**
	 * Warnings about poller groups pinned to CPUs off the local CPUs of a device one of
	 * their queues is on.
	 * @param nodes the place of each open device, by device key
	 */
	static List<String> warnings(RdmaProperties properties, Map<String, DeviceNode> nodes) {
		List<String> warnings = new ArrayList<>();
		properties.getPollers().forEach((group, poller) -> {
			if (poller.getCpus() == null) {
				return;
			}
			BitSet cpus = CpuAffinity.parse(poller.getCpus());
			properties.getCompletionQueues().forEach((queue, config) -> {
				if (!group.equals(config.getPoller())) {
					return;
				}
				DeviceNode node = nodes.get(RdmaPropertiesValidator.resolveDevice(properties,
						RdmaPropertiesValidator.QUEUES + queue, config.getDevice()));
				if (node == null || node.localCpus() == null) {
					return;
				}
				BitSet off = (BitSet) cpus.clone();
				off.andNot(node.localCpus());
				if (!off.isEmpty()) {
					warnings.add("Poller group '" + group + "' is pinned to CPUs " + poller.getCpus() + " ("
							+ RdmaPropertiesValidator.POLLERS + group + ".cpus), but queue '" + queue
							+ "' is on device " + node.device() + " of NUMA node " + node.numaNode()
							+ ", whose CPUs are " + CpuAffinity.format(node.localCpus()) + ": CPUs "
							+ CpuAffinity.format(off) + " reach it across the interconnect");
				}
			});
		});
		return warnings;
	}

}
