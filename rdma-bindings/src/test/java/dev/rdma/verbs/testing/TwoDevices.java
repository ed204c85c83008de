package dev.rdma.verbs.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;

import dev.rdma.verbs.Gid;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The two rxe devices of the cross-device tier: {@code a} (rxeA on vethA, 10.0.0.1) and
 * {@code b} (rxeB on vethB, 10.0.0.2), brought up in one Soft-RoCE guest by
 * {@code scripts/softroce-vm --two-devices} (which {@code scripts/test} uses for the
 * device tier) and described to the tests by the environment
 * {@code RDMA_DEVICE_A RDMA_NETDEV_A RDMA_IP_A RDMA_GID_INDEX_A} and the same with
 * {@code _B}. Traffic between them crosses the veth pair (policy routing keeps it off
 * {@code lo}); a test proves it through each device's {@link Peer#hwCounter hw_counters},
 * not only through a call that returned.
 *
 * @param a the first device (the client side by convention)
 * @param b the second device (the server side by convention)
 */
public record TwoDevices(Peer a, Peer b) {

	/**
	 * The two devices the environment names. Fails (device tests never skip) when any
	 * variable is missing or malformed, or a named device does not exist.
	 */
	public static TwoDevices require() {
		return new TwoDevices(Peer.fromEnvironment("A"), Peer.fromEnvironment("B"));
	}

	/**
	 * One of the two devices: its name, its netdev, the netdev's IPv4 address and the
	 * index of its IPv4-mapped (RoCE v2) GID on port 1.
	 *
	 * @param device the RDMA device, e.g. {@code rxeA}
	 * @param netdev its netdev, e.g. {@code vethA}
	 * @param ipv4 the netdev's address, e.g. {@code 10.0.0.1}
	 * @param gidIndex the index of {@code ::ffff:<ipv4>} in port 1's GID table
	 */
	public record Peer(String device, String netdev, String ipv4, int gidIndex) {

		/** The port every test uses. */
		public static final int PORT = 1;

		static Peer fromEnvironment(String side) {
			String device = env("RDMA_DEVICE_" + side);
			String netdev = env("RDMA_NETDEV_" + side);
			String ipv4 = env("RDMA_IP_" + side);
			String index = env("RDMA_GID_INDEX_" + side);
			int gidIndex;
			try {
				gidIndex = Integer.parseInt(index.trim());
			}
			catch (NumberFormatException ex) {
				throw new AssertionError("RDMA_GID_INDEX_" + side + "=" + index + " is not a number");
			}
			if (!Files.isDirectory(Path.of("/sys/class/infiniband", device))) {
				throw new AssertionError("RDMA_DEVICE_" + side + "=" + device
						+ " names no RDMA device (/sys/class/infiniband/" + device + " is missing)");
			}
			return new Peer(device, netdev, ipv4, gidIndex);
		}

		private static String env(String name) {
			String value = System.getenv(name);
			if (value == null || value.isBlank()) {
				throw new AssertionError("the cross-device tests need two RDMA devices described by RDMA_DEVICE_A/_B, "
						+ "RDMA_NETDEV_A/_B, RDMA_IP_A/_B and RDMA_GID_INDEX_A/_B, and " + name + " is not set: "
						+ "run them through scripts/test (scripts/softroce-vm --two-devices sets them)");
			}
			return value;
		}

		/** This device's sysfs directory for port 1. */
		public Path portDirectory() {
			return Path.of("/sys/class/infiniband", device, "ports", Integer.toString(PORT));
		}

		/**
		 * The port's hardware counter {@code name}
		 * ({@code /sys/class/infiniband/<device>/ports/1/hw_counters/<name>}, e.g.
		 * {@code sent_pkts}, {@code rcvd_pkts}).
		 */
		public long hwCounter(String name) {
			return TwoDevices.hwCounter(device, name);
		}

		/** The GID at {@link #gidIndex()} as sysfs shows it (IPv4-mapped). */
		public Gid gid() {
			String text = read(portDirectory().resolve("gids").resolve(Integer.toString(gidIndex)));
			Gid gid = new Gid(HexFormat.of().parseHex(text.replace(":", "")));
			if (!gid.isIpv4Mapped()) {
				throw new AssertionError(device + " GID index " + gidIndex + " is " + gid + ", not IPv4-mapped");
			}
			return gid;
		}

		/** {@code sent_pkts} and {@code rcvd_pkts} now. */
		public Traffic traffic() {
			return TwoDevices.traffic(device);
		}

		private static String read(Path file) {
			try {
				return Files.readString(file, StandardCharsets.US_ASCII).trim();
			}
			catch (IOException ex) {
				throw new UncheckedIOException("cannot read " + file, ex);
			}
		}

		@Override
		public String toString() {
			return device + " (" + netdev + ", " + ipv4 + ", GID index " + gidIndex + ")";
		}

	}

	/**
	 * Both devices' packet counters now ({@code a}'s first): the mark that a test checks
	 * the traffic against, {@code Marks m = two.mark(); ... m.assertCrossed(n);}.
	 */
	public Marks mark() {
		Traffic ta = a.traffic();
		return new Marks(this, ta, b.traffic());
	}

	/**
	 * Both devices' packet counters at one moment.
	 *
	 * @param two the devices
	 * @param a {@code two.a()}'s counters
	 * @param b {@code two.b()}'s counters
	 */
	public record Marks(TwoDevices two, Traffic a, Traffic b) {

		/**
		 * {@link TwoDevices#assertCrossed(Peer, Traffic, Peer, Traffic, int)}: both
		 * devices sent and received at least {@code messages} packets since this mark.
		 */
		public void assertCrossed(int messages) {
			TwoDevices.assertCrossed(two.a(), a, two.b(), b, messages);
		}

		/** What {@code two.a()} counted since this mark. */
		public Traffic aSince() {
			return two.a().traffic().since(a);
		}

		/** What {@code two.b()} counted since this mark. */
		public Traffic bSince() {
			return two.b().traffic().since(b);
		}

	}

	/**
	 * A device's packet counters at one moment.
	 *
	 * @param sent {@code sent_pkts}
	 * @param received {@code rcvd_pkts}
	 */
	public record Traffic(long sent, long received) {

		/** The packets counted since {@code before}. */
		public Traffic since(Traffic before) {
			return new Traffic(sent - before.sent, received - before.received);
		}

	}

	/**
	 * How long {@link #assertCrossed} reads the counters again before it fails: the
	 * kernel caches a device's {@code hw_counters} for
	 * {@code RDMA_HW_STATS_DEFAULT_LIFESPAN} (10 ms), so a read right after a fast
	 * exchange can still show the values of the mark taken just before it.
	 */
	public static final Duration COUNTER_WAIT = Duration.ofSeconds(2);

	/**
	 * Asserts that both devices sent and received at least {@code messages} packets since
	 * the marks {@code a0} and {@code b0} (their {@code hw_counters}), and prints the
	 * growth. Reads the counters again every 20 ms, up to {@link #COUNTER_WAIT}, until
	 * they show it.
	 */
	public static void assertCrossed(Peer a, Traffic a0, Peer b, Traffic b0, int messages) {
		assertCrossed(a.device(), a0, b.device(), b0, messages);
	}

	/**
	 * {@link #assertCrossed(Peer, Traffic, Peer, Traffic, int)} for devices named
	 * {@code a} and {@code b} (the same name twice: that device sent and received them).
	 */
	public static void assertCrossed(String a, Traffic a0, String b, Traffic b0, int messages) {
		long deadline = System.nanoTime() + COUNTER_WAIT.toNanos();
		Traffic da;
		Traffic db;
		while (true) {
			da = traffic(a).since(a0);
			db = traffic(b).since(b0);
			boolean crossed = Math.min(Math.min(da.sent(), da.received()),
					Math.min(db.sent(), db.received())) >= messages;
			if (crossed || System.nanoTime() - deadline > 0) {
				break;
			}
			pause(20);
		}
		System.out.printf("hw_counters: %s sent %d received %d packets, %s sent %d received %d%n", a, da.sent(),
				da.received(), b, db.sent(), db.received());
		assertThat(da.sent()).as("%s sent_pkts", a).isGreaterThanOrEqualTo(messages);
		assertThat(da.received()).as("%s rcvd_pkts", a).isGreaterThanOrEqualTo(messages);
		assertThat(db.sent()).as("%s sent_pkts", b).isGreaterThanOrEqualTo(messages);
		assertThat(db.received()).as("%s rcvd_pkts", b).isGreaterThanOrEqualTo(messages);
	}

	/**
	 * Port 1's hardware counter {@code name} of {@code device}
	 * ({@code /sys/class/infiniband/<device>/ports/1/hw_counters/<name>}).
	 */
	public static long hwCounter(String device, String name) {
		Path file = Path.of("/sys/class/infiniband", device, "ports", Integer.toString(Peer.PORT), "hw_counters", name);
		try {
			return Long.parseLong(Files.readString(file, StandardCharsets.US_ASCII).trim());
		}
		catch (IOException ex) {
			throw new UncheckedIOException("cannot read " + file, ex);
		}
	}

	/** {@code sent_pkts} and {@code rcvd_pkts} of {@code device} now. */
	public static Traffic traffic(String device) {
		return new Traffic(hwCounter(device, "sent_pkts"), hwCounter(device, "rcvd_pkts"));
	}

	/** Sleeps {@code millis} ms (an interrupt ends the sleep and is kept). */
	public static void pause(long millis) {
		try {
			Thread.sleep(millis);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
		}
	}

}
