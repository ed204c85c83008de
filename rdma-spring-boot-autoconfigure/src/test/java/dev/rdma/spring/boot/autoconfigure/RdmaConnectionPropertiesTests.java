package dev.rdma.spring.boot.autoconfigure;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

import org.springframework.boot.configurationprocessor.json.JSONArray;
import org.springframework.boot.configurationprocessor.json.JSONObject;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.util.unit.DataSize;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.support.ConnectionSettings;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.cm.CmParameters;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatNoException;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

/**
 * {@code rdma.connections}: every bad value fails startup naming the property, on a
 * machine without RDMA too (nothing native is touched); good values become the
 * connection's settings with the documented defaults (the bindings' CmParameters).
 */
class RdmaConnectionPropertiesTests {

	private static final String[] BASE = { "rdma.devices.nic0.name=mlx5_0", "rdma.completion-queues.tx.entries=256",
			"rdma.completion-queues.rx.entries=256" };

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(RdmaAutoConfigurations.all());

	private static String[] with(String... more) {
		List<String> all = new ArrayList<>(Arrays.asList(BASE));
		all.addAll(Arrays.asList(more));
		return all.toArray(String[]::new);
	}

	/** The base, a client {@code orders} of 10.0.0.2:7471 on tx/rx, and {@code more}. */
	private static String[] client(String... more) {
		return orders("connect", more);
	}

	/**
	 * The base, a server {@code orders} listening on 10.0.0.2:7471 on tx/rx, and
	 * {@code more}.
	 */
	private static String[] server(String... more) {
		return orders("listen", more);
	}

	private static String[] orders(String role, String... more) {
		String c = "rdma.connections.orders.";
		List<String> all = new ArrayList<>(
				List.of(c + role + "=10.0.0.2:7471", c + "send-queue=tx", c + "receive-queue=rx"));
		all.addAll(Arrays.asList(more));
		return with(all.toArray(String[]::new));
	}

	static Stream<Arguments> misconfigurations() {
		String c = "rdma.connections.orders.";
		return Stream.of(
				Arguments.of("rdma.connections.orders", "sets neither listen nor connect",
						with(c + "send-queue=tx", c + "receive-queue=rx")),
				Arguments.of("rdma.connections.orders", "sets both listen and connect",
						with(c + "listen=10.0.0.2:7471", c + "connect=10.0.0.2:7471", c + "send-queue=tx",
								c + "receive-queue=rx")),
				Arguments.of("rdma.connections.orders.connect", "is not host:port",
						with(c + "connect=10.0.0.2", c + "send-queue=tx", c + "receive-queue=rx")),
				Arguments.of("rdma.connections.orders.listen", "the port must be a number between 1 and 65535",
						with(c + "listen=10.0.0.2:70000", c + "send-queue=tx", c + "receive-queue=rx")),
				Arguments.of("rdma.connections.orders.send-queue", "is not set",
						with(c + "connect=10.0.0.2:7471", c + "receive-queue=rx")),
				Arguments.of("rdma.connections.orders.receive-queue", "names no queue under rdma.completion-queues",
						with(c + "connect=10.0.0.2:7471", c + "send-queue=tx", c + "receive-queue=rx9")),
				Arguments.of("rdma.connections.orders.send-depth", "must be between 1 and", client(c + "send-depth=0")),
				Arguments.of("rdma.connections.orders.max-inline-data", "max-inline-data=-1 must be between 0 and 4096",
						client(c + "max-inline-data=-1")),
				Arguments.of("rdma.connections.orders.signal-interval", "signal-interval=0 must be between 1 and",
						client(c + "signal-interval=0")),
				Arguments.of("rdma.connections.orders.receive-buffers", "must be between 1 and 64",
						client(c + "receive-buffers=65")),
				Arguments.of("rdma.connections.orders.cm.retry-count", "must be between 0 and 7",
						client(c + "cm.retry-count=9")),
				Arguments.of("rdma.connections.orders.retry.multiplier", "must be between 1 and 100",
						client(c + "retry.multiplier=0.5")),
				Arguments.of("rdma.connections.orders.max-peers", "is for a server", client(c + "max-peers=3")),
				Arguments.of("rdma.connections.orders.allowed-peers[1]",
						"allowed-peers[1]=10.0.0.300 is not an IP address or CIDR range",
						server(c + "allowed-peers=10.0.0.1,10.0.0.300")),
				Arguments.of("rdma.connections.orders.allowed-peers[0]", "the prefix length must be between 0 and 32",
						server(c + "allowed-peers=10.0.0.0/33")),
				Arguments.of("rdma.connections.orders.allowed-peers[0]", "has bits set beyond its /24 prefix",
						server(c + "allowed-peers=10.0.0.7/24")),
				Arguments.of("rdma.connections.orders.allowed-peers[0]", "host names are not resolved here",
						server(c + "allowed-peers=peer.example.com")),
				Arguments.of("rdma.connections.orders.allowed-peers[1]", "the prefix length must be between 0 and 128",
						server(c + "allowed-peers=fd00::/8,fd00::/129")),
				Arguments.of("rdma.connections.orders.allowed-peers", "is for a server",
						client(c + "allowed-peers=10.0.0.1")),
				Arguments.of("rdma.connections.orders.send-timeout", "must not be negative",
						client(c + "send-timeout=-1s")),
				Arguments.of("rdma.connections.orders.remote-access-size",
						"remote-access-size=-1B must be between 0B (no region) and 1GB",
						client(c + "remote-access-size=-1B")),
				Arguments.of("rdma.connections.orders.remote-access-size",
						"remote-access-size=2147483648B must be between 0B (no region) and 1GB",
						server(c + "remote-access-size=2GB")),
				Arguments.of("rdma.connections.orders.remote-access-size", "needs rdma.connections.orders.exchange=cm",
						server(c + "exchange=out-of-band", c + "remote-access-size=4KB")),
				Arguments.of("rdma.connections.orders.cm.responder-resources",
						"cm.responder-resources=0 refuses every RDMA READ of the peer",
						server(c + "remote-access-size=4KB", c + "cm.responder-resources=0")),
				Arguments.of("rdma.completion-queues.tx.entries", "is less than the 512 completions",
						server(c + "max-peers=8")),
				Arguments.of("rdma.connections.orders.out-of-band.gid-index",
						"applies to rdma.connections.orders.exchange=out-of-band, but the exchange is cm",
						client(c + "out-of-band.gid-index=3")),
				Arguments.of("rdma.connections.orders.out-of-band.gid-index", "must be between 0 and 255",
						client(c + "exchange=out-of-band", c + "out-of-band.gid-index=256")),
				Arguments.of("rdma.connections.orders.out-of-band.port", "must be between 1 and 255",
						server(c + "exchange=out-of-band", c + "out-of-band.port=0")),
				Arguments.of("rdma.connections.orders.out-of-band.liveness",
						"applies to rdma.connections.orders.exchange=out-of-band, but the exchange is cm",
						client(c + "out-of-band.liveness=none")),
				Arguments.of("rdma.connections.orders.out-of-band.liveness",
						"rdma.connections.orders.out-of-band.liveness=udp is neither tcp nor none",
						client(c + "exchange=out-of-band", c + "out-of-band.liveness=udp")),
				Arguments.of("rdma.connections.orders.out-of-band.liveness",
						"rdma.connections.orders.out-of-band.liveness= is neither tcp nor none",
						server(c + "exchange=out-of-band", c + "out-of-band.liveness=")),
				Arguments.of("rdma.connections.orders.source", "with rdma.connections.orders.exchange=out-of-band",
						client(c + "exchange=out-of-band", c + "source=10.0.0.1")),
				Arguments.of("rdma.completion-queues.rx.wc-flags",
						"rdma.completion-queues.rx.wc-flags=[imm] does not provide [qp-num, byte-len], which "
								+ "rdma.connections.orders needs on its receive-queue 'rx'",
						client("rdma.completion-queues.rx.type=extended", "rdma.completion-queues.rx.wc-flags=imm")),
				Arguments.of("rdma.completion-queues.tx.wc-flags",
						"rdma.completion-queues.tx.wc-flags=[byte-len] does not provide [qp-num], which "
								+ "rdma.connections.orders needs on its send-queue 'tx'",
						server("rdma.completion-queues.tx.type=extended",
								"rdma.completion-queues.tx.wc-flags=byte-len")),
				Arguments.of("rdma.completion-queues.rx.wc-flags",
						"rdma.completion-queues.rx.wc-flags=[qp-num, imm] does not provide [byte-len], which "
								+ "rdma.connections.orders needs on its receive-queue 'rx'",
						server("rdma.completion-queues.rx.type=extended",
								"rdma.completion-queues.rx.wc-flags=qp-num,imm")),
				Arguments.of("rdma.connections.orders.message-size",
						"rdma.connections.orders.message-size=1073741824 times rdma.connections.orders.send-depth=2 is "
								+ "2147483648 bytes of registered buffers, more than the 2147483639",
						client(c + "message-size=1073741824", c + "send-depth=2", c + "receive-depth=1")),
				Arguments.of("rdma.connections.orders.message-size",
						"rdma.connections.orders.message-size=536870912 times rdma.connections.orders.receive-depth=4 is "
								+ "2147483648 bytes",
						client(c + "message-size=536870912", c + "send-depth=1", c + "receive-depth=4")),
				Arguments.of("rdma.connections.orders.connect-timeout", "connect-timeout=PT4800000H is longer than 24h",
						client(c + "connect-timeout=200000d")),
				Arguments.of("rdma.connections.orders.retry.max-interval",
						"retry.max-interval=PT4800000H is longer than 24h", client(c + "retry.max-interval=200000d")),
				Arguments.of("rdma.connections.orders.send-timeout", "send-timeout=PT48H is longer than 24h",
						client(c + "send-timeout=2d")),
				Arguments.of("rdma.connections.tx", "clashes with rdma.completion-queues.tx",
						with("rdma.connections.tx.connect=10.0.0.2:7471", "rdma.connections.tx.send-queue=tx",
								"rdma.connections.tx.receive-queue=rx")));
	}

	@ParameterizedTest(name = "[{index}] {0} {1}")
	@MethodSource("misconfigurations")
	void badValueFailsStartupNamingTheProperty(String property, String message, String[] properties) {
		long open = NativeObjects.open();
		runner.withPropertyValues(properties).run(context -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			RdmaConfigurationException rce = null;
			for (Throwable t = failure; t != null; t = t.getCause()) {
				if (t instanceof RdmaConfigurationException e) {
					rce = e;
				}
			}
			assertThat(rce).as("RdmaConfigurationException in " + failure).isNotNull();
			assertThat(rce.property()).isEqualTo(property);
			assertThat(rce.getMessage()).contains(message);
		});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void unknownExchangeFailsStartupNamingTheProperty() {
		long open = NativeObjects.open();
		runner
			.withPropertyValues(
					with("rdma.connections.orders.connect=10.0.0.2:7471", "rdma.connections.orders.send-queue=tx",
							"rdma.connections.orders.receive-queue=rx", "rdma.connections.orders.exchange=tcp"))
			.run(context -> {
				assertThat(context).hasFailed();
				StringBuilder messages = new StringBuilder();
				for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
					messages.append(t.getMessage()).append('\n');
				}
				assertThat(messages).contains("rdma.connections.orders.exchange").contains("tcp");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void exchangeBindsAndBecomesTheSettingsOutOfBandOptions() {
		String c = "rdma.connections.";
		Map<String, String> values = new LinkedHashMap<>();
		for (String property : with(c + "cmlink.connect=10.0.0.2:7471", c + "cmlink.send-queue=tx",
				c + "cmlink.receive-queue=rx", c + "oob.listen=10.0.0.2:7472", c + "oob.send-queue=tx",
				c + "oob.receive-queue=rx", c + "oob.exchange=out-of-band", c + "gid.connect=10.0.0.2:7473",
				c + "gid.send-queue=tx", c + "gid.receive-queue=rx", c + "gid.exchange=OUT_OF_BAND",
				c + "gid.out-of-band.gid-index=3", c + "gid.out-of-band.port=2", c + "mtu.connect=10.0.0.2:7474",
				c + "mtu.send-queue=tx", c + "mtu.receive-queue=rx", c + "mtu.exchange=out-of-band",
				c + "mtu.out-of-band.path-mtu=512")) {
			int eq = property.indexOf('=');
			values.put(property.substring(0, eq), property.substring(eq + 1));
		}
		RdmaProperties properties = new Binder(new MapConfigurationPropertySource(values))
			.bind("rdma", RdmaProperties.class)
			.get();
		assertThat(properties.getConnections().get("cmlink").getExchange()).isEqualTo(ConnectionExchange.CM);
		assertThat(properties.getConnections().get("oob").getExchange()).isEqualTo(ConnectionExchange.OUT_OF_BAND);
		Map<String, ConnectionSettings> settings = validatedSettings(properties);
		assertThat(settings.get("cmlink").outOfBand()).isNull();
		assertThat(settings.get("oob").outOfBand()).isEqualTo(new ConnectionSettings.OutOfBandOptions(1, -1));
		assertThat(settings.get("oob").server()).isTrue();
		assertThat(settings.get("gid").outOfBand()).isEqualTo(new ConnectionSettings.OutOfBandOptions(2, 3));
		assertThat(settings.get("oob").outOfBand().pathMtu())
			.isEqualTo(ConnectionSettings.OutOfBandOptions.DEFAULT_PATH_MTU);
		assertThat(settings.get("mtu").outOfBand()).isEqualTo(new ConnectionSettings.OutOfBandOptions(1, -1, 512));
		assertThat(settings.get("oob").outOfBand().liveness()).as("the default")
			.isEqualTo(ConnectionSettings.Liveness.TCP);
		assertThat(properties.getConnections().get("oob").getOutOfBand().getLiveness()).isEqualTo("tcp");
	}

	/** The settings of validated {@code properties}, by connection name. */
	private static Map<String, ConnectionSettings> validatedSettings(RdmaProperties properties) {
		RdmaConnectionProperties.validate(properties);
		Map<String, ConnectionSettings> settings = new LinkedHashMap<>();
		RdmaConnectionProperties.settings(properties).forEach(s -> settings.put(s.name(), s));
		return settings;
	}

	@Test
	void outOfBandLivenessBindsToTheSettings() {
		String c = "rdma.connections.";
		Map<String, String> values = new LinkedHashMap<>(Map.of("rdma.devices.nic0.name", "mlx5_0",
				"rdma.completion-queues.tx.entries", "256", "rdma.completion-queues.rx.entries", "256"));
		for (String name : List.of("none", "tcp")) {
			values.put(c + name + ".send-queue", "tx");
			values.put(c + name + ".receive-queue", "rx");
			values.put(c + name + ".exchange", "out-of-band");
		}
		values.putAll(Map.of(c + "none.connect", "10.0.0.2:7475", c + "none.out-of-band.liveness", "none",
				c + "tcp.listen", "10.0.0.2:7476", c + "tcp.out-of-band.liveness", "TCP"));
		Map<String, ConnectionSettings> settings = validatedSettings(
				new Binder(new MapConfigurationPropertySource(values)).bind("rdma", RdmaProperties.class).get());
		assertThat(settings.get("none").outOfBand())
			.isEqualTo(new ConnectionSettings.OutOfBandOptions(1, -1, 0, ConnectionSettings.Liveness.NONE));
		assertThat(settings.get("tcp").outOfBand().liveness()).as("either case")
			.isEqualTo(ConnectionSettings.Liveness.TCP);
	}

	@Test
	void outOfBandPathMtuMustBeAnIbMtuAndNeedsTheOutOfBandExchange() {
		String c = "rdma.connections.orders.";
		RdmaProperties properties = new RdmaProperties();
		properties.getDevices().put("nic0", new DeviceProperties());
		properties.getCompletionQueues().put("tx", new CompletionQueueProperties());
		ConnectionProperties p = new ConnectionProperties();
		p.setConnect("10.0.0.2:7471");
		p.setSendQueue("tx");
		p.setReceiveQueue("tx");
		p.getOutOfBand().setPathMtu(1000);
		properties.getConnections().put("orders", p);
		assertThatExceptionOfType(RdmaConfigurationException.class)
			.isThrownBy(() -> RdmaConnectionProperties.validate(properties))
			.satisfies(ex -> assertThat(ex.property()).isEqualTo(c + "out-of-band.path-mtu"))
			.withMessageContaining(
					"applies to " + "rdma.connections.orders.exchange=out-of-band, but the exchange is cm");
		p.setExchange(ConnectionExchange.OUT_OF_BAND);
		assertThatExceptionOfType(RdmaConfigurationException.class)
			.isThrownBy(() -> RdmaConnectionProperties.validate(properties))
			.satisfies(ex -> assertThat(ex.property()).isEqualTo(c + "out-of-band.path-mtu"))
			.withMessage(c + "out-of-band.path-mtu=1000 is not an IB path MTU (256, 512, 1024, 2048 or 4096)");
		p.getOutOfBand().setPathMtu(4096);
		assertThatNoException().isThrownBy(() -> RdmaConnectionProperties.validate(properties));
	}

	@Test
	void settingsCarryTheDefaults() {
		RdmaProperties properties = new RdmaProperties();
		properties.getCompletionQueues().put("tx", new CompletionQueueProperties());
		ConnectionProperties c = new ConnectionProperties();
		c.setConnect("10.0.0.2:7471");
		c.setSource("10.0.0.1");
		c.setSendQueue("tx");
		c.setReceiveQueue("tx");
		properties.getConnections().put("orders", c);
		ConnectionSettings s = RdmaConnectionProperties.settings(properties).get(0);
		assertThat(s.server()).isFalse();
		assertThat(s.address().getPort()).isEqualTo(7471);
		assertThat(s.address().getAddress().getHostAddress()).isEqualTo("10.0.0.2");
		assertThat(s.source().getAddress().getHostAddress()).isEqualTo("10.0.0.1");
		assertThat(s.cm()).isEqualTo(CmParameters.DEFAULTS);
		assertThat(s.outOfBand()).as("exchange: cm by default").isNull();
		assertThat(s.receiveBuffers()).isEqualTo(s.receiveDepth()).isEqualTo(64);
		assertThat(s.retry().interval(1).toMillis()).isEqualTo(100);
		assertThat(s.retry().interval(3).toMillis()).isEqualTo(400);
		assertThat(s.retry().interval(30).toMillis()).isEqualTo(5000);
		assertThat(s.remoteAccessSize()).as("no region unless asked for").isZero();
	}

	@Test
	void remoteAccessSizeIsADataSizeBecomingBytes() {
		RdmaProperties bound = new Binder(new MapConfigurationPropertySource(Map.of("rdma.devices.nic0.name", "mlx5_0",
				"rdma.completion-queues.tx.entries", "256", "rdma.connections.orders.connect", "10.0.0.2:7471",
				"rdma.connections.orders.send-queue", "tx", "rdma.connections.orders.receive-queue", "tx",
				"rdma.connections.orders.remote-access-size", "64KB")))
			.bind("rdma", RdmaProperties.class)
			.get();
		RdmaConnectionProperties.validate(bound);
		assertThat(RdmaConnectionProperties.settings(bound).get(0).remoteAccessSize()).isEqualTo(64 * 1024);
		RdmaProperties properties = new RdmaProperties();
		properties.getCompletionQueues().put("tx", new CompletionQueueProperties());
		ConnectionProperties c = new ConnectionProperties();
		c.setListen("10.0.0.2:7471");
		c.setSendQueue("tx");
		c.setReceiveQueue("tx");
		c.setRemoteAccessSize(DataSize.ofGigabytes(1));
		DeviceProperties device = new DeviceProperties();
		device.setName("mlx5_0");
		properties.getDevices().put("nic0", device);
		properties.getConnections().put("orders", c);
		RdmaConnectionProperties.validate(properties);
		assertThat(RdmaConnectionProperties.settings(properties).get(0).remoteAccessSize()).as("the largest")
			.isEqualTo(1L << 30);
	}

	@Test
	void remoteAccessSizeIsInTheMetadataWithItsDefaultAndADescription() throws Exception {
		String resource = "META-INF/spring/configuration-metadata/" + ConnectionProperties.class.getName() + ".json";
		String json;
		try (InputStream in = getClass().getClassLoader().getResourceAsStream(resource)) {
			assertThat(in).as(resource).isNotNull();
			json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
		}
		JSONArray all = new JSONObject(json).getJSONArray("properties");
		JSONObject property = null;
		for (int i = 0; i < all.length(); i++) {
			if (all.getJSONObject(i).getString("name").equals("remote-access-size")) {
				property = all.getJSONObject(i);
			}
		}
		assertThat(property).as("remote-access-size in " + resource).isNotNull();
		assertThat(property.getString("type")).isEqualTo(DataSize.class.getName());
		assertThat(property.getString("defaultValue")).isEqualTo("0B");
		assertThat(property.getString("description")).contains("RDMA WRITE and READ");
	}

}
