package dev.rdma.verbs.testing;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import static dev.rdma.verbs.testing.DeviceTestSupport.run;

/**
 * An rxe device of a test's own on a veth pair of its own, for the tests that remove a
 * device ({@code rdma link delete}): rxe0, rxeA and rxeB stay untouched, so such a test
 * runs among the others, in the same JVM. {@link #create} waits until port 1 is ACTIVE
 * with an IPv4-mapped GID; {@link #close()} deletes whatever is left (the device, then
 * the veth pair). Root inside the throw-away VM only ({@code RXE_VM=1}, or
 * {@code RDMA_TEST_ALLOW_DEVICE_ADMIN=1}); anywhere else {@link #create} fails saying why
 * (device tests never skip). Tests that use it are tagged {@code device-admin}.
 */
public final class ThrowAwayDevice implements AutoCloseable {

	private final String device;

	private final String netdev;

	private final String ip;

	private ThrowAwayDevice(String device, String netdev, String ip) {
		this.device = device;
		this.netdev = netdev;
		this.ip = ip;
	}

	/**
	 * Creates {@code device} (rxe) on the veth {@code netdev} (address {@code ip}/24; its
	 * peer is {@code netdev + "P"}), first removing a leftover of an earlier run.
	 */
	public static ThrowAwayDevice create(String device, String netdev, String ip) throws Exception {
		if (!"1".equals(System.getenv("RXE_VM")) && !"1".equals(System.getenv("RDMA_TEST_ALLOW_DEVICE_ADMIN"))) {
			throw new AssertionError("this test creates and deletes an rxe device and a veth pair: it runs only "
					+ "inside scripts/softroce-vm (RXE_VM=1) or with RDMA_TEST_ALLOW_DEVICE_ADMIN=1");
		}
		ThrowAwayDevice d = new ThrowAwayDevice(device, netdev, ip);
		d.close();
		try {
			run(30, "ip", "link", "add", netdev, "type", "veth", "peer", "name", netdev + "P");
			run(30, "ip", "addr", "add", ip + "/24", "dev", netdev);
			run(30, "ip", "link", "set", netdev, "up");
			run(30, "ip", "link", "set", netdev + "P", "up");
			run(60, "rdma", "link", "add", device, "type", "rxe", "netdev", netdev);
			Path port = Path.of("/sys/class/infiniband", device, "ports/1");
			DeviceTestSupport.await(Duration.ofSeconds(60),
					() -> read(port.resolve("state")).contains("ACTIVE")
							&& (read(port.resolve("gids/1")).startsWith("0000:0000:0000:0000:0000:ffff:")
									|| read(port.resolve("gids/2")).startsWith("0000:0000:0000:0000:0000:ffff:")),
					device + " ACTIVE with an IPv4-mapped GID");
			return d;
		}
		catch (Exception | AssertionError e) {
			d.close();
			throw e;
		}
	}

	/** The rxe device's name. */
	public String name() {
		return this.device;
	}

	/** The address of its netdev. */
	public String ip() {
		return this.ip;
	}

	/** Whether the kernel still lists the device. */
	public boolean exists() {
		return Files.exists(Path.of("/sys/class/infiniband", this.device));
	}

	/** Deletes the device if it is still there, then the veth pair. Idempotent. */
	@Override
	public void close() throws IOException {
		try {
			if (exists()) {
				run(120, "rdma", "link", "delete", this.device);
			}
			if (Files.exists(Path.of("/sys/class/net", this.netdev))) {
				run(30, "ip", "link", "delete", this.netdev);
			}
		}
		catch (InterruptedException e) {
			Thread.currentThread().interrupt();
			throw new InterruptedIOException("interrupted while deleting " + this.device);
		}
	}

	private static String read(Path p) {
		try {
			return Files.readString(p, StandardCharsets.US_ASCII).trim();
		}
		catch (IOException e) {
			return "";
		}
	}

}
