package dev.rdma.benchmarks.starter;

import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.BooleanSupplier;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

import dev.rdma.benchmarks.Progress;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.PinnedMemory;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.RdmaProperties;
import dev.rdma.spring.boot.autoconfigure.metrics.RdmaMetricsAutoConfiguration;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.ServerConnection;
import dev.rdma.verbs.LockedMemory;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import static dev.rdma.benchmarks.starter.StarterBench.env;
import static dev.rdma.benchmarks.starter.StarterBench.start;

/**
 * A server with many peers (issue 33, case {@code peers} of {@code scripts/bench}): the
 * pinned memory of a starter server with N peers with and without
 * {@code shared-receive-queue}, every message delivered and routed, and the time to
 * accept all N. Two processes per mode, started by {@code scripts/bench}: the server (one
 * {@code listen} connection, {@code max-peers=N}, on device B) and the client (one
 * application with N client connections {@code c0..c<N-1>} on device A, as
 * {@code SharedReceiveQueueDeviceTest} does). Separate processes so that what the server
 * pins is its own: the starter's computation ({@link PinnedMemory}, the meter
 * {@code rdma.memory.pinned.configured}), what its memory regions pin now
 * ({@link LockedMemory#registered()}, the meter {@code rdma.memory.pinned}), the kernel's
 * {@code VmPin} of the process, and the memory regions {@code rdma resource
 * show mr} lists for its pid.
 * <p>
 * The server: starts, writes {@code DIR/peers-MODE.ready}, records when its first and its
 * N-th peer were accepted ({@link ServerConnection#peers()}, looked at every 20 ms),
 * waits until N × M messages arrived, each checked (client {@code id}'s messages come in
 * sequence through one peer connection, its own, distinct from the others'), measures,
 * prints {@code case=peers ...} lines, writes {@code DIR/peers-MODE.done} and closes when
 * its peers left. The client: waits for the ready file, starts, waits until its N
 * connections are established, sends M 16-byte messages on each (id, sequence), round
 * robin, each connection's window its {@code send-depth}, waits for the done file and
 * closes.
 *
 * <pre>PeersBench server|client MODE(srq|nosrq) N M TCP_PORT DIR</pre>
 *
 * Devices and addresses: {@code RDMA_DEVICE_A/_B}, {@code RDMA_IP_A/_B}
 * ({@code scripts/softroce-vm --two-devices}).
 */
public final class PeersBench {

	static final String SERVER = "srv";

	/** The server's configuration, the same in both modes. */
	static final int MESSAGE_SIZE = 4096;

	static final int RECEIVE_DEPTH = 64;

	/** The server only receives here; its sends would be replies. */
	static final int SEND_DEPTH = 4;

	/** Each client connection's window (its send-depth). */
	static final int CLIENT_WINDOW = 2;

	/** Seconds to wait for every peer, and for every message. */
	static final long CONNECT_SECONDS = Long.getLong("peers.connect-seconds", 1200);

	static final long MESSAGE_SECONDS = Long.getLong("peers.message-seconds", 600);

	private PeersBench() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length != 6 || !List.of("server", "client").contains(args[0])
				|| !List.of("srq", "nosrq").contains(args[1])) {
			System.err.println("usage: PeersBench server|client srq|nosrq N M TCP_PORT DIR");
			System.exit(2);
		}
		boolean srq = args[1].equals("srq");
		int n = Integer.parseInt(args[2]);
		int m = Integer.parseInt(args[3]);
		int port = Integer.parseInt(args[4]);
		Path ready = Path.of(args[5], "peers-" + args[1] + ".ready");
		Path done = Path.of(args[5], "peers-" + args[1] + ".done");
		Progress.startWatchdog("peers_" + args[0], CONNECT_SECONDS + MESSAGE_SECONDS + 300);
		if (args[0].equals("server")) {
			Files.deleteIfExists(ready);
			Files.deleteIfExists(done);
			server(srq, n, m, port, ready, done);
		}
		else {
			client(args[1], n, m, port, ready, done);
		}
	}

	/** The server's SRQ: two receives per peer (the clients' window), at least 64. */
	static int srqDepth(int n) {
		return Math.max(64, CLIENT_WINDOW * n);
	}

	static List<String> serverProperties(boolean srq, int n, int port) {
		String c = "rdma.connections." + SERVER + ".";
		// the receive CQ holds what can be outstanding: every posted receive
		int receives = srq ? srqDepth(n) : n * RECEIVE_DEPTH;
		List<String> p = new ArrayList<>(common(env("RDMA_DEVICE_B"), n * SEND_DEPTH + 256, receives + 256));
		p.addAll(List.of(c + "listen=" + env("RDMA_IP_B") + ":" + port, c + "max-peers=" + n, c + "send-queue=tx",
				c + "receive-queue=rx", c + "message-size=" + MESSAGE_SIZE, c + "send-depth=" + SEND_DEPTH,
				c + "receive-depth=" + RECEIVE_DEPTH, c + "connect-timeout=" + CONNECT_SECONDS + "s",
				c + "shared-receive-queue.enabled=" + srq));
		if (srq) {
			p.addAll(List.of(c + "shared-receive-queue.depth=" + srqDepth(n),
					c + "shared-receive-queue.limit=" + srqDepth(n) / 4));
		}
		return p;
	}

	private static List<String> common(String device, int txEntries, int rxEntries) {
		return List.of("spring.main.banner-mode=off", "logging.level.root=WARN", "rdma.required=true",
				"rdma.shutdown-timeout=30s", "rdma.devices.nic.name=" + device, "rdma.devices.nic.port=1",
				"rdma.channels.ev.device=nic", "rdma.completion-queues.tx.channel=ev",
				"rdma.completion-queues.tx.entries=" + txEntries, "rdma.completion-queues.rx.channel=ev",
				"rdma.completion-queues.rx.entries=" + rxEntries);
	}

	private static void server(boolean srq, int n, int m, int port, Path ready, Path done) throws Exception {
		String mode = srq ? "srq" : "nosrq";
		Progress.line("starting the server (" + mode + ", max-peers " + n + ") on " + env("RDMA_DEVICE_B"));
		try (ConfigurableApplicationContext app = start(ServerApp.class, serverProperties(srq, n, port))) {
			ServerConnection link = app.getBean(SERVER, ServerConnection.class);
			Checker checker = app.getBean(Checker.class);
			checker.size(n);
			long idle = LockedMemory.registered();
			Files.writeString(ready, "ready\n");
			long up = System.nanoTime();
			Progress.line("listening; " + idle + " bytes registered with no peer");
			long first = 0;
			long all = 0;
			int last = 0;
			long deadline = up + TimeUnit.SECONDS.toNanos(CONNECT_SECONDS);
			while (System.nanoTime() < deadline) {
				int peers = link.peers().size();
				long now = System.nanoTime();
				if (peers > 0 && first == 0) {
					first = now;
				}
				if (peers / 8 != last / 8) {
					Progress.line(peers + " peers accepted, " + (now - up) / 1_000_000 + " ms after listening");
				}
				last = peers;
				if (peers >= n) {
					all = now;
					break;
				}
				Thread.sleep(20);
			}
			int accepted = link.peers().size();
			Progress.line(accepted + " of " + n + " peers accepted");
			long expected = (long) accepted * m;
			awaitTrue(() -> checker.received.get() >= expected, MESSAGE_SECONDS);
			long delivered = checker.received.get();
			Progress.line(delivered + " of " + expected + " messages delivered");
			// the figures, all N peers connected
			RdmaProperties properties = app.getBean(RdmaProperties.class);
			long configured = (long) app.getBean(MeterRegistry.class)
				.get("rdma.memory.pinned.configured")
				.gauge()
				.value();
			long computed = PinnedMemory.of(properties).total();
			long registered = (long) app.getBean(MeterRegistry.class).get("rdma.memory.pinned").gauge().value();
			String status = Files.readString(Path.of("/proc/self/status"));
			long[] mrs = memoryRegions();
			String problems = String.join("; ", checker.problems.stream().limit(5).toList());
			boolean routed = checker.problems.isEmpty() && checker.connections.size() == accepted
					&& checker.connections.values().stream().distinct().count() == accepted;
			out("case=peers mode=%s n=%d m=%d accepted=%d accept_first_to_all_ms=%d listen_to_all_ms=%d "
					+ "delivered=%d expected=%d routed=%s configured=%d computed=%d registered=%d "
					+ "registered_idle=%d vm_pin_kb=%d vm_lck_kb=%d device_mrs=%d device_qps=%d srq_depth=%d "
					+ "message_size=%d receive_depth=%d send_depth=%d", mode, n, m, accepted,
					all == 0 ? -1 : (all - first) / 1_000_000, all == 0 ? -1 : (all - up) / 1_000_000, delivered,
					(long) n * m, routed, configured, computed, registered, idle, kb(status, "VmPin:"),
					kb(status, "VmLck:"), mrs[0], mrs[1], srq ? srqDepth(n) : 0, MESSAGE_SIZE, RECEIVE_DEPTH,
					SEND_DEPTH);
			// the starter's computation for the other mode and for the default send-depth
			// (64)
			var c = properties.getConnections().get(SERVER);
			c.getSharedReceiveQueue().setEnabled(!srq);
			long other = PinnedMemory.of(properties).total();
			c.getSharedReceiveQueue().setEnabled(srq);
			out("# peers %s: the starter's computation (PinnedMemory, properties only) of this server: %d bytes; "
					+ "the same server %s the shared receive queue: %d bytes", mode, computed, srq ? "without" : "with",
					other);
			for (String line : PinnedMemory.of(properties).lines(LockedMemory.current())) {
				out("# peers %s: %s", mode, line);
			}
			if (!problems.isEmpty()) {
				out("# peers benchmark failed: %s: misrouted or out of order: %s", mode, problems);
			}
			if (accepted < n || delivered != (long) n * m) {
				out("# peers benchmark failed: %s: %d of %d peers, %d of %d messages", mode, accepted, n, delivered,
						(long) n * m);
			}
			Files.writeString(done, "done\n");
			awaitTrue(() -> link.peers().isEmpty(), 120);
			Progress.line("peers left; closing");
		}
	}

	private static void client(String mode, int n, int m, int port, Path ready, Path done) throws Exception {
		awaitTrue(() -> Files.exists(ready), 600, 500);
		List<String> p = new ArrayList<>(
				common(env("RDMA_DEVICE_A"), (CLIENT_WINDOW + 2) * n + 256, (CLIENT_WINDOW + 2) * n + 256));
		for (int i = 0; i < n; i++) {
			String c = "rdma.connections.c" + i + ".";
			p.addAll(List.of(c + "connect=" + env("RDMA_IP_B") + ":" + port, c + "source=" + env("RDMA_IP_A"),
					c + "send-queue=tx", c + "receive-queue=rx", c + "message-size=64",
					c + "send-depth=" + CLIENT_WINDOW, c + "receive-depth=2", c + "retry.initial-interval=100ms",
					c + "retry.max-interval=2s", c + "connect-timeout=" + CONNECT_SECONDS + "s",
					c + "send-timeout=120s"));
		}
		long t0 = System.nanoTime();
		Progress.line("starting the client application: " + n + " connections from " + env("RDMA_DEVICE_A"));
		try (ConfigurableApplicationContext app = start(ClientApp.class, p)) {
			long started = System.nanoTime();
			List<RdmaConnection> links = new ArrayList<>();
			for (int i = 0; i < n; i++) {
				links.add(app.getBean("c" + i, RdmaConnection.class));
			}
			Progress.line("started in " + (started - t0) / 1_000_000 + " ms; connecting");
			awaitTrue(() -> links.stream().allMatch(l -> l.state() == ConnectionState.ESTABLISHED), CONNECT_SECONDS);
			long connected = System.nanoTime();
			long up = links.stream().filter(l -> l.state() == ConnectionState.ESTABLISHED).count();
			out("# peers %s client: %d of %d connections established %d ms after the application's start "
					+ "(started in %d ms)", mode, up, n, (connected - started) / 1_000_000, (started - t0) / 1_000_000);
			byte[] message = new byte[16];
			ByteBuffer b = ByteBuffer.wrap(message).order(ByteOrder.LITTLE_ENDIAN);
			for (int s = 0; s < m; s++) {
				for (int i = 0; i < n; i++) {
					if (links.get(i).state() == ConnectionState.ESTABLISHED) {
						b.putInt(0, i).putLong(8, s);
						links.get(i).send(message, 0, message.length);
					}
				}
			}
			long sent = System.nanoTime();
			long errors = links.stream().mapToLong(l -> l.statistics().sendErrors()).sum();
			out("# peers %s client: %d x %d messages sent in %d ms, %d send errors", mode, n, m,
					(sent - connected) / 1_000_000, errors);
			awaitTrue(() -> Files.exists(done), MESSAGE_SECONDS + 60, 500);
		}
	}

	/**
	 * The memory regions and queue pairs on the server's device (only the server uses
	 * it): {@code rdma resource show} (iproute2); rxe lists no MR per process in
	 * {@code rdma resource show mr}, but counts them per device.
	 */
	private static long[] memoryRegions() {
		long[] r = { -1, -1 };
		try {
			Process p = new ProcessBuilder("rdma", "resource", "show").redirectErrorStream(true).start();
			String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
			p.waitFor(30, TimeUnit.SECONDS);
			for (String line : out.split("\n")) {
				if (line.contains(env("RDMA_DEVICE_B") + ":")) {
					String[] w = line.trim().split("\\s+");
					for (int i = 0; i + 1 < w.length; i++) {
						if (w[i].equals("mr")) {
							r[0] = Long.parseLong(w[i + 1]);
						}
						else if (w[i].equals("qp")) {
							r[1] = Long.parseLong(w[i + 1]);
						}
					}
				}
			}
		}
		catch (Exception ex) {
			out("# peers: rdma resource show: %s", ex);
		}
		return r;
	}

	private static long kb(String status, String field) {
		for (String line : status.split("\n")) {
			if (line.startsWith(field)) {
				return Long.parseLong(line.substring(field.length()).trim().split("\\s+")[0]);
			}
		}
		return -1;
	}

	private static void awaitTrue(BooleanSupplier condition, long seconds) throws InterruptedException {
		awaitTrue(condition, seconds, 20);
	}

	/**
	 * Files are looked at less often: the guest reaches the host's file system through
	 * 9p.
	 */
	private static void awaitTrue(BooleanSupplier condition, long seconds, long pauseMillis)
			throws InterruptedException {
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
		while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
			Thread.sleep(pauseMillis);
		}
	}

	private static void out(String format, Object... args) {
		// one write(2) per line
		System.out.print(String.format(Locale.ROOT, format, args) + "\n");
	}

	/** The server: the auto-configuration with its meters, and the {@link Checker}. */
	@ImportAutoConfiguration({ RdmaAutoConfiguration.class, RdmaMetricsAutoConfiguration.class })
	static class ServerApp {

		@Bean
		MeterRegistry meterRegistry() {
			return new SimpleMeterRegistry();
		}

		@Bean
		Checker checker() {
			return new Checker();
		}

	}

	/** The clients: the auto-configuration only. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class ClientApp {

	}

	/**
	 * Checks that each client's messages come in sequence through one peer connection,
	 * its own; on the server's poller.
	 */
	static class Checker {

		final AtomicLong received = new AtomicLong();

		volatile AtomicLongArray next = new AtomicLongArray(0);

		final Map<Integer, RdmaConnection> connections = new ConcurrentHashMap<>();

		final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();

		void size(int n) {
			next = new AtomicLongArray(n);
		}

		@RdmaMessageListener(connection = SERVER)
		void onMessage(RdmaMessage message) {
			int id = message.buffer().get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
			long seq = message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 8);
			AtomicLongArray expected = next;
			if (message.length() != 16 || id < 0 || id >= expected.length()) {
				problems.add("a message of " + message.length() + " bytes from client " + id);
				return;
			}
			RdmaConnection from = connections.computeIfAbsent(id, (k) -> message.connection());
			if (from != message.connection()) {
				problems.add("message " + seq + " of client " + id + " came through another peer connection");
			}
			long e = expected.getAndIncrement(id);
			if (seq != e) {
				problems.add("client " + id + ": message " + seq + " where " + e + " was expected");
			}
			received.incrementAndGet();
		}

	}

}
