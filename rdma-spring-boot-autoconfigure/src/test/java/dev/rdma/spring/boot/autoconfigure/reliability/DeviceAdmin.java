package dev.rdma.spring.boot.autoconfigure.reliability;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Administration of the device under test for the fault scenarios that need root inside
 * the Soft-RoCE VM: taking its netdev down and up ({@code ip link}) and deleting it
 * ({@code rdma link delete}). Both would be destructive on a developer's or a server's
 * real NIC, so they run only inside the throw-away VM ({@code RXE_VM=1}, set by
 * {@code scripts/softroce-vm}) or when {@code RDMA_TEST_ALLOW_DEVICE_ADMIN=1} says so
 * explicitly; anywhere else the test fails (device tests never skip) with a message
 * saying why.
 */
public final class DeviceAdmin {

	private DeviceAdmin() {
	}

	static void requireThrowAwayDevice(String what) {
		if (!"1".equals(System.getenv("RXE_VM")) && !"1".equals(System.getenv("RDMA_TEST_ALLOW_DEVICE_ADMIN"))) {
			throw new AssertionError(what + " is destructive: it runs only inside scripts/softroce-vm (RXE_VM=1) or "
					+ "with RDMA_TEST_ALLOW_DEVICE_ADMIN=1 on a machine whose RDMA device and netdev may be taken away");
		}
	}

	/**
	 * The netdev under {@code device} port 1: {@code $RXE_VM_NETDEV} in the VM, else the
	 * GID table's netdev.
	 */
	static String netdev(String device) throws IOException {
		String vm = System.getenv("RXE_VM_NETDEV");
		if ("1".equals(System.getenv("RXE_VM")) && vm != null && !vm.isBlank()) {
			return vm.trim();
		}
		Path ndev = Path.of("/sys/class/infiniband", device, "ports/1/gid_attrs/ndevs/0");
		return Files.readString(ndev, StandardCharsets.UTF_8).trim();
	}

}
