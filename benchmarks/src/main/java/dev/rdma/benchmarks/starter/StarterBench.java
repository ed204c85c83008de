package dev.rdma.benchmarks.starter;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;

/**
 * What the starter's benchmarks across two devices share ({@link XdevStarterPingPong},
 * {@link XstreamBench}, {@link PeersBench}): the environment of
 * {@code scripts/softroce-vm --two-devices}, the applications' start, the properties of
 * one side (a device, a channel, one queue for both directions, connection {@code xs}),
 * and the result lines {@code scripts/bench} reads.
 */
final class StarterBench {

	static final String CONNECTION = "xs";

	static final String CLIENT_QUEUE = "xsc";

	static final String SERVER_QUEUE = "xss";

	private StarterBench() {
	}

	/**
	 * {@code RDMA_DEVICE_A/_B}, {@code RDMA_IP_A/_B}: fails when not set.
	 */
	static String env(String key) {
		String v = System.getenv(key);
		if (v == null || v.isBlank()) {
			throw new IllegalStateException(key + " is not set (run inside scripts/softroce-vm --two-devices)");
		}
		return v;
	}

	/** A non-web application of {@code app} with these properties, started. */
	static ConfigurableApplicationContext start(Class<?> app, List<String> properties) {
		return new SpringApplicationBuilder(app).web(WebApplicationType.NONE)
			.properties(properties.toArray(String[]::new))
			.run();
	}

	/**
	 * The client's connection {@link #CONNECTION} of {@code client}, once
	 * {@code ESTABLISHED}: fails after 120 s naming its state and {@code route}.
	 */
	static RdmaConnection awaitEstablished(ConfigurableApplicationContext client, String route)
			throws InterruptedException {
		RdmaConnection connection = client.getBean(CONNECTION, RdmaConnection.class);
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
		while (connection.state() != ConnectionState.ESTABLISHED && System.nanoTime() < deadline) {
			Thread.sleep(10);
		}
		if (connection.state() != ConnectionState.ESTABLISHED) {
			throw new IllegalStateException(
					"connection " + CONNECTION + " is " + connection.state() + " after 120 s (" + route + ")");
		}
		return connection;
	}

	/**
	 * One side: device, channel, one queue of {@code entries} for both directions of
	 * connection {@link #CONNECTION} with these depths (the caller adds the endpoint and
	 * the rest).
	 */
	static List<String> side(String device, String queue, String mode, int entries, int sendDepth, int receiveDepth,
			int messageSize) {
		String q = "rdma.completion-queues." + queue;
		String c = "rdma.connections." + CONNECTION;
		return new ArrayList<>(List.of("spring.main.banner-mode=off", "logging.level.root=WARN", "rdma.required=true",
				"rdma.shutdown-timeout=10s", "rdma.devices.nic.name=" + device, "rdma.devices.nic.port=1",
				"rdma.channels.ev.device=nic", q + ".device=nic", q + ".type=legacy", q + ".entries=" + entries,
				q + ".channel=ev", q + ".polling.mode=" + mode, c + ".send-queue=" + queue,
				c + ".receive-queue=" + queue, c + ".send-depth=" + sendDepth, c + ".receive-depth=" + receiveDepth,
				c + ".message-size=" + messageSize, c + ".retry.initial-interval=100ms", c + ".retry.max-interval=1s",
				c + ".connect-timeout=30s"));
	}

	/**
	 * {@code case=NAME EXTRA impl=java unit=UNIT median= min= max= reps=} of {@code v}
	 * (not changed), in one write(2): a peer process printing to the same file cannot
	 * split it.
	 */
	static void report(String name, String extra, String unit, double[] v) {
		double[] s = v.clone();
		Arrays.sort(s);
		System.out
			.print(String.format(Locale.ROOT, "case=%s%s impl=java unit=%s median=%.2f min=%.2f max=%.2f reps=%d%n",
					name, extra, unit, s[s.length / 2], s[0], s[s.length - 1], s.length));
	}

}
