package dev.rdma.spring.boot.autoconfigure;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import org.springframework.util.unit.DataSize;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.connection.support.AddressRange;
import dev.rdma.spring.connection.support.ConnectionSettings;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.cm.CmParameters;

/**
 * Checks {@code rdma.connections} without a device (addresses, ranges, the queues and
 * device they name, whether the queues hold every completion the connections can have in
 * flight) and turns each into the {@link ConnectionSettings} the connection runs with.
 * Every failure is a {@link RdmaConfigurationException} naming the property.
 */
final class RdmaConnectionProperties {

	static final String CONNECTIONS = RdmaProperties.PREFIX + ".connections.";

	/**
	 * The largest depth of a queue pair accepted here (rxe's max_qp_wr is 1048576); the
	 * device's own max_qp_wr is checked when it is opened ({@link RdmaConnectionLimits}).
	 */
	static final int MAX_DEPTH = 1 << 20;

	/** The largest max-inline-data: more than any device grants (mlx5 about 1KB). */
	static final int MAX_INLINE_DATA = 4096;

	/**
	 * The most bytes of send (or receive) buffers of one connection, message-size times
	 * their number: the largest memory a {@link java.nio.ByteBuffer} view can cover.
	 */
	static final long MAX_BUFFER_BYTES = Integer.MAX_VALUE - 8;

	/** The largest remote-access-size accepted here (as message-size: 1 GiB). */
	static final long MAX_REMOTE_ACCESS_SIZE = 1L << 30;

	private RdmaConnectionProperties() {
	}

	static void validate(RdmaProperties properties) {
		Map<String, Long> queueLoad = new LinkedHashMap<>();
		properties.getConnections().forEach((key, c) -> validate(properties, key, c, queueLoad));
		queueLoad.forEach((queue, load) -> {
			int entries = properties.getCompletionQueues().get(queue).getEntries();
			if (load > entries) {
				String path = RdmaPropertiesValidator.QUEUES + queue + ".entries";
				throw new RdmaConfigurationException(path,
						path + "=" + entries + " is less than the " + load
								+ " completions the connections using it can have outstanding (send-depth and "
								+ "receive-depth of each, times max-peers for a server)",
						"Set " + path + " to at least " + load + ", or lower the connections' depths.");
			}
		});
	}

	private static void validate(RdmaProperties properties, String key, ConnectionProperties c,
			Map<String, Long> queueLoad) {
		String path = CONNECTIONS + key;
		boolean server = c.getListen() != null;
		if (server == (c.getConnect() != null)) {
			throw new RdmaConfigurationException(path,
					path + (server ? " sets both listen and connect" : " sets neither listen nor connect"),
					"Set " + path + ".listen (a server, host:port to listen on) or " + path
							+ ".connect (a client, the server's host:port).");
		}
		address(path + (server ? ".listen" : ".connect"), server ? c.getListen() : c.getConnect());
		validateExchange(path, c);
		if (c.getSource() != null) {
			if (server) {
				throw new RdmaConfigurationException(path + ".source",
						path + ".source is for a client; a server listens on " + path + ".listen",
						"Remove " + path + ".source.");
			}
			ip(path + ".source", c.getSource());
		}
		range(path + ".max-peers", c.getMaxPeers(), 1, 1024, "1");
		allowedPeers(path + ".allowed-peers", server, c.getAllowedPeers());
		if (!server && c.getMaxPeers() != 1) {
			throw new RdmaConfigurationException(path + ".max-peers",
					path + ".max-peers=" + c.getMaxPeers() + " is for a server; a client has one peer",
					"Remove " + path + ".max-peers.");
		}
		positive(path + ".connect-timeout", c.getConnectTimeout(), "5s");
		RetryProperties retry = c.getRetry();
		positive(path + ".retry.initial-interval", retry.getInitialInterval(), "100ms");
		positive(path + ".retry.max-interval", retry.getMaxInterval(), "5s");
		if (retry.getMaxInterval().compareTo(retry.getInitialInterval()) < 0) {
			throw new RdmaConfigurationException(path + ".retry.max-interval",
					path + ".retry.max-interval=" + retry.getMaxInterval() + " is shorter than " + path
							+ ".retry.initial-interval=" + retry.getInitialInterval(),
					"Set " + path + ".retry.max-interval to at least the initial interval.");
		}
		if (!(retry.getMultiplier() >= 1.0) || retry.getMultiplier() > 100) {
			throw new RdmaConfigurationException(path + ".retry.multiplier",
					path + ".retry.multiplier=" + retry.getMultiplier() + " must be between 1 and 100",
					"Set " + path + ".retry.multiplier to e.g. 2.");
		}
		range(path + ".retry.max-attempts", retry.getMaxAttempts(), 0, Integer.MAX_VALUE, "0 (never give up)");
		String sendQueue = queue(properties, path + ".send-queue", c.getSendQueue());
		String receiveQueue = queue(properties, path + ".receive-queue", c.getReceiveQueue());
		String sendDevice = properties.getCompletionQueues().get(sendQueue).getDevice();
		String sendDeviceKey = RdmaPropertiesValidator.resolveDevice(properties,
				RdmaPropertiesValidator.QUEUES + sendQueue, sendDevice);
		String receiveDeviceKey = RdmaPropertiesValidator.resolveDevice(properties,
				RdmaPropertiesValidator.QUEUES + receiveQueue,
				properties.getCompletionQueues().get(receiveQueue).getDevice());
		if (!sendDeviceKey.equals(receiveDeviceKey)) {
			throw new RdmaConfigurationException(path + ".receive-queue",
					path + ".receive-queue=" + receiveQueue + " is on device " + receiveDeviceKey + " but " + path
							+ ".send-queue=" + sendQueue + " is on device " + sendDeviceKey
							+ ": a queue pair's queues are on its device",
					"Use two queues of the same device.");
		}
		providesConnectionFields(properties, path, "send-queue", sendQueue, List.of(WcExFlag.QP_NUM));
		providesConnectionFields(properties, path, "receive-queue", receiveQueue,
				List.of(WcExFlag.QP_NUM, WcExFlag.BYTE_LEN));
		if (c.getDevice() != null) {
			String device = RdmaPropertiesValidator.resolveDevice(properties, path, c.getDevice());
			if (!device.equals(sendDeviceKey)) {
				throw new RdmaConfigurationException(path + ".device",
						path + ".device=" + device + " but its queues are on device " + sendDeviceKey,
						"Set " + path + ".device to " + sendDeviceKey + ", or use queues of device " + device + ".");
			}
		}
		range(path + ".send-depth", c.getSendDepth(), 1, MAX_DEPTH, "64");
		range(path + ".receive-depth", c.getReceiveDepth(), 1, MAX_DEPTH, "64");
		if (c.getReceiveBuffers() != null) {
			range(path + ".receive-buffers", c.getReceiveBuffers(), 1, c.getReceiveDepth(),
					"at most receive-depth (" + c.getReceiveDepth() + ")");
		}
		range(path + ".message-size", c.getMessageSize(), 1, 1 << 30, "4096");
		range(path + ".max-inline-data", c.getMaxInlineData(), 0, MAX_INLINE_DATA, "64");
		range(path + ".signal-interval", c.getSignalInterval(), 1, MAX_DEPTH, "16 (one signaled send in 16)");
		bufferBytes(path, "send-depth", c.getSendDepth(), c.getMessageSize());
		bufferBytes(path, (c.getReceiveBuffers() != null) ? "receive-buffers" : "receive-depth",
				(c.getReceiveBuffers() != null) ? c.getReceiveBuffers() : c.getReceiveDepth(), c.getMessageSize());
		if (c.getSendTimeout() == null || c.getSendTimeout().isNegative()) {
			throw new RdmaConfigurationException(path + ".send-timeout",
					path + ".send-timeout=" + c.getSendTimeout() + " must not be negative",
					"Set " + path + ".send-timeout to e.g. 1s, or 0 to fail at once when the send queue is full.");
		}
		RdmaPropertiesValidator.notTooLong(path + ".send-timeout", c.getSendTimeout(), "1s");
		remoteAccessSize(path + ".remote-access-size", c.getRemoteAccessSize());
		CmProperties cm = c.getCm();
		range(path + ".cm.responder-resources", cm.getResponderResources(), 0, 255, "255 (the device's maximum)");
		if (cm.getResponderResources() == 0 && c.getRemoteAccessSize() != null
				&& c.getRemoteAccessSize().toBytes() > 0) {
			// the peer's RDMA READs of this side's region need responder resources here
			throw new RdmaConfigurationException(path + ".cm.responder-resources",
					path + ".cm.responder-resources=0 refuses every RDMA READ of the peer, but " + path
							+ ".remote-access-size=" + c.getRemoteAccessSize() + " offers a region to read",
					"Set " + path + ".cm.responder-resources to at least 1 (default 255: the device's maximum), or "
							+ path + ".remote-access-size to 0.");
		}
		range(path + ".cm.initiator-depth", cm.getInitiatorDepth(), 0, 255, "255 (the device's maximum)");
		range(path + ".cm.retry-count", cm.getRetryCount(), 0, 7, "7");
		range(path + ".cm.rnr-retry-count", cm.getRnrRetryCount(), 0, 7, "7");
		sharedReceiveQueue(path, server, c);
		long peers = server ? c.getMaxPeers() : 1;
		queueLoad.merge(sendQueue, peers * c.getSendDepth(), Long::sum);
		// on a shared receive queue the receives in flight are its depth, for all peers
		queueLoad.merge(receiveQueue, c.getSharedReceiveQueue().isEnabled() ? c.getSharedReceiveQueue().getDepth()
				: peers * c.getReceiveDepth(), Long::sum);
	}

	/**
	 * A connection reads {@code qp_num} of every completion (it routes the completion to
	 * its queue pair) and {@code byte_len} of every receive (the message's length): an
	 * extended queue whose {@code wc-flags} lack them would fail every completion.
	 */
	private static void providesConnectionFields(RdmaProperties properties, String path, String role, String queue,
			List<WcExFlag> needed) {
		CompletionQueueProperties config = properties.getCompletionQueues().get(queue);
		long provided = RdmaResources.providedWcFlags(config);
		List<WcExFlag> missing = needed.stream().filter(f -> (provided & f.bit()) == 0).toList();
		if (missing.isEmpty()) {
			return;
		}
		String wcFlags = RdmaPropertiesValidator.QUEUES + queue + ".wc-flags";
		throw new RdmaConfigurationException(wcFlags,
				wcFlags + "=" + RdmaPropertiesValidator.yaml(config.getWcFlags()) + " does not provide "
						+ RdmaPropertiesValidator.yaml(missing) + ", which " + path + " needs on its " + role + " '"
						+ queue + "' ("
						+ (missing.contains(WcExFlag.QP_NUM) ? "qp-num routes each completion to its connection"
								: "byte-len is a received message's length")
						+ "; without " + (missing.size() == 1 ? "it" : "them")
						+ " every completion of the queue fails)",
				"Add " + RdmaPropertiesValidator.yaml(missing) + " to " + wcFlags + ", or remove " + wcFlags
						+ " (an extended queue then provides the standard fields).");
	}

	private static void validateExchange(String path, ConnectionProperties c) {
		ConnectionExchange exchange = c.getExchange();
		if (exchange == null) {
			throw new RdmaConfigurationException(path + ".exchange", path + ".exchange is empty",
					"Set " + path + ".exchange to cm (rdma_cm, the default) or out-of-band.");
		}
		OutOfBandProperties oob = c.getOutOfBand();
		if (exchange == ConnectionExchange.CM) {
			boolean liveness = !OutOfBandProperties.LIVENESS_TCP.equals(oob.getLiveness());
			if (oob.getGidIndex() != null || oob.getPort() != 1 || oob.getPathMtu() != null || liveness) {
				String property = path
						+ (oob.getGidIndex() != null ? ".out-of-band.gid-index" : oob.getPathMtu() != null
								? ".out-of-band.path-mtu" : liveness ? ".out-of-band.liveness" : ".out-of-band.port");
				throw new RdmaConfigurationException(property,
						property + " applies to " + path + ".exchange=out-of-band, but the exchange is cm",
						"Set " + path + ".exchange=out-of-band, or remove " + property + ".");
			}
			return;
		}
		range(path + ".out-of-band.port", oob.getPort(), 1, 255, "1");
		if (oob.getGidIndex() != null) {
			range(path + ".out-of-band.gid-index", oob.getGidIndex(), 0, 255,
					"the index of an IPv4 RoCE v2 GID (omit it to find one)");
		}
		Integer mtu = oob.getPathMtu();
		if (mtu != null && (mtu < 256 || mtu > 4096 || Integer.bitCount(mtu) != 1)) {
			String property = path + ".out-of-band.path-mtu";
			throw new RdmaConfigurationException(property,
					property + "=" + mtu + " is not an IB path MTU (256, 512, 1024, 2048 or 4096)",
					"Set " + property + " to 256, 512, 1024, 2048 or 4096 (at most the port's active MTU), or "
							+ "remove it for 1024.");
		}
		liveness(path + ".out-of-band.liveness", oob.getLiveness());
		if (c.getSource() != null) {
			throw new RdmaConfigurationException(path + ".source",
					path + ".source is rdma_cm's source address; with " + path
							+ ".exchange=out-of-band the RDMA device is that of the connection's queues",
					"Remove " + path + ".source, or choose the device with " + path + ".send-queue and " + path
							+ ".receive-queue.");
		}
		if (c.getRemoteAccessSize() != null && c.getRemoteAccessSize().toBytes() > 0) {
			// the region record travels in rdma_cm's private data; ibv_rc_pingpong's
			// record has no room for it
			throw new RdmaConfigurationException(path + ".remote-access-size",
					path + ".remote-access-size=" + c.getRemoteAccessSize() + " needs " + path
							+ ".exchange=cm: the region is advertised in rdma_cm's private data, which the"
							+ " out-of-band exchange does not have",
					"Set " + path + ".exchange=cm, or " + path + ".remote-access-size to 0.");
		}
	}

	/**
	 * The liveness that {@code value} of {@code property} names.
	 * @throws RdmaConfigurationException when it names none
	 */
	private static ConnectionSettings.Liveness liveness(String property, @Nullable String value) {
		String v = (value == null) ? "" : value.trim();
		if (v.equalsIgnoreCase(OutOfBandProperties.LIVENESS_TCP)) {
			return ConnectionSettings.Liveness.TCP;
		}
		if (v.equalsIgnoreCase(OutOfBandProperties.LIVENESS_NONE)) {
			return ConnectionSettings.Liveness.NONE;
		}
		throw new RdmaConfigurationException(property,
				property + "=" + (value == null ? "" : value) + " is neither tcp nor none",
				"Set " + property + " to tcp (the exchange's TCP connection stays open and tells when the peer goes"
						+ " away, the default) or none (it is closed after the records, as ibv_rc_pingpong does).");
	}

	/**
	 * The ranges of a server's {@code allowed-peers} (a client has none).
	 * @throws RdmaConfigurationException naming the entry that is not an address or CIDR
	 * range
	 */
	static List<AddressRange> allowedPeers(String path, boolean server, @Nullable List<String> entries) {
		if (entries == null || entries.isEmpty()) {
			return List.of();
		}
		if (!server) {
			throw new RdmaConfigurationException(path,
					path + " is for a server; a client connects to the one peer it names", "Remove " + path + ".");
		}
		List<AddressRange> ranges = new ArrayList<>();
		for (int i = 0; i < entries.size(); i++) {
			String entry = entries.get(i);
			String property = path + "[" + i + "]";
			try {
				ranges.add(AddressRange.parse(entry == null ? "" : entry));
			}
			catch (IllegalArgumentException ex) {
				throw new RdmaConfigurationException(property,
						property + "=" + entry + " is not an IP address or CIDR range: " + ex.getMessage(),
						"Set " + property + " to an address or range such as 10.0.0.7, 10.0.0.0/24 or fd00::/8.");
			}
		}
		return List.copyOf(ranges);
	}

	/** The allowed-peers of every server connection that sets them (validated before). */
	static Map<String, List<AddressRange>> allowedPeers(RdmaProperties properties) {
		Map<String, List<AddressRange>> all = new LinkedHashMap<>();
		properties.getConnections().forEach((key, c) -> {
			boolean server = c.getListen() != null;
			List<AddressRange> ranges = allowedPeers(CONNECTIONS + key + ".allowed-peers", server, c.getAllowedPeers());
			if (!ranges.isEmpty()) {
				all.put(key, ranges);
			}
		});
		return all;
	}

	/** The settings of every connection (validated before). */
	static List<ConnectionSettings> settings(RdmaProperties properties) {
		List<ConnectionSettings> all = new ArrayList<>();
		properties.getConnections().forEach((key, c) -> {
			String path = CONNECTIONS + key;
			boolean server = c.getListen() != null;
			InetSocketAddress address = address(path + (server ? ".listen" : ".connect"),
					server ? c.getListen() : c.getConnect());
			InetSocketAddress source = c.getSource() == null ? null
					: new InetSocketAddress(ip(path + ".source", c.getSource()), 0);
			RetryProperties r = c.getRetry();
			CmProperties cm = c.getCm();
			all.add(new ConnectionSettings(key, server, address, source, c.getMaxPeers(), c.getConnectTimeout(),
					new ConnectionSettings.Retry(r.getInitialInterval(), r.getMultiplier(), r.getMaxInterval(),
							r.getMaxAttempts()),
					c.getSendQueue(), c.getReceiveQueue(), c.getSendDepth(), c.getReceiveDepth(),
					c.getReceiveBuffers() == null ? c.getReceiveDepth() : c.getReceiveBuffers(), c.getMessageSize(),
					c.getSendTimeout(), c.isRequired(),
					new CmParameters(cm.getResponderResources(), cm.getInitiatorDepth(), cm.getRetryCount(),
							cm.getRnrRetryCount()),
					properties.getShutdownTimeout(), c.getRemoteAccessSize().toBytes(), outOfBand(path, c),
					new ConnectionSettings.DataPath(c.getMaxInlineData(), c.getSignalInterval()), sharedReceive(c)));
		});
		return all;
	}

	private static ConnectionSettings.@Nullable SharedReceive sharedReceive(ConnectionProperties c) {
		SharedReceiveQueueProperties srq = c.getSharedReceiveQueue();
		return srq.isEnabled() ? new ConnectionSettings.SharedReceive(srq.getDepth(), srq.effectiveLimit()) : null;
	}

	private static ConnectionSettings.@Nullable OutOfBandOptions outOfBand(String path, ConnectionProperties c) {
		if (c.getExchange() != ConnectionExchange.OUT_OF_BAND) {
			return null;
		}
		Integer gid = c.getOutOfBand().getGidIndex();
		Integer mtu = c.getOutOfBand().getPathMtu();
		ConnectionSettings.Liveness liveness = liveness(path + ".out-of-band.liveness", c.getOutOfBand().getLiveness());
		return new ConnectionSettings.OutOfBandOptions(c.getOutOfBand().getPort(), gid == null ? -1 : gid,
				mtu == null ? ConnectionSettings.OutOfBandOptions.DEFAULT_PATH_MTU : mtu, liveness);
	}

	private static String queue(RdmaProperties properties, String path, @Nullable String queue) {
		if (queue == null || queue.isBlank()) {
			throw new RdmaConfigurationException(path, path + " is not set",
					"Set " + path + " to a queue under rdma.completion-queues (configured: "
							+ properties.getCompletionQueues().keySet() + ").");
		}
		if (!properties.getCompletionQueues().containsKey(queue)) {
			throw new RdmaConfigurationException(path,
					path + "=" + queue + " names no queue under rdma.completion-queues (configured: "
							+ properties.getCompletionQueues().keySet() + ")",
					"Set " + path + " to one of " + properties.getCompletionQueues().keySet() + " or add "
							+ RdmaPropertiesValidator.QUEUES + queue + ".");
		}
		return queue;
	}

	/** host:port, the host an IP address or a name that resolves, the port 1..65535. */
	static InetSocketAddress address(String path, @Nullable String value) {
		String v = value == null ? "" : value.trim();
		int colon = v.lastIndexOf(':');
		if (colon <= 0 || colon == v.length() - 1) {
			throw new RdmaConfigurationException(path, path + "=" + value + " is not host:port",
					"Set " + path + " to e.g. 10.0.0.2:7471.");
		}
		String host = v.substring(0, colon);
		if (host.startsWith("[") && host.endsWith("]")) {
			host = host.substring(1, host.length() - 1);
		}
		int port;
		try {
			port = Integer.parseInt(v.substring(colon + 1));
		}
		catch (NumberFormatException ex) {
			port = -1;
		}
		if (port < 1 || port > 65535) {
			throw new RdmaConfigurationException(path,
					path + "=" + value + ": the port must be a number between 1 and 65535",
					"Set " + path + " to e.g. " + host + ":7471.");
		}
		return new InetSocketAddress(ip(path, host), port);
	}

	static InetAddress ip(String path, String host) {
		try {
			return InetAddress.getByName(host.trim());
		}
		catch (UnknownHostException ex) {
			throw new RdmaConfigurationException(path, path + ": host '" + host + "' does not resolve",
					"Use an IP address of the RDMA netdev, e.g. 10.0.0.2.", ex);
		}
	}

	private static void range(String path, int value, int min, int max, String example) {
		if (value < min || value > max) {
			throw new RdmaConfigurationException(path, path + "=" + value + " must be between " + min + " and " + max,
					"Set " + path + " to e.g. " + example + ".");
		}
	}

	/**
	 * message-size times the number of buffers of one kind must not exceed
	 * {@link #MAX_BUFFER_BYTES}.
	 */
	private static void bufferBytes(String path, String count, int buffers, int messageSize) {
		long bytes = (long) buffers * messageSize;
		if (bytes > MAX_BUFFER_BYTES) {
			throw new RdmaConfigurationException(path + ".message-size",
					path + ".message-size=" + messageSize + " times " + path + "." + count + "=" + buffers + " is "
							+ bytes + " bytes of registered buffers, more than the " + MAX_BUFFER_BYTES
							+ " a connection can have of each kind",
					"Lower " + path + ".message-size or " + path + "." + count + " so that their product is at most "
							+ MAX_BUFFER_BYTES + ".");
		}
	}

	/**
	 * {@code shared-receive-queue}: a server's only; depth 1..{@link #MAX_DEPTH}, its
	 * buffers within {@link #MAX_BUFFER_BYTES}, limit 0..depth-1.
	 */
	private static void sharedReceiveQueue(String path, boolean server, ConnectionProperties c) {
		SharedReceiveQueueProperties srq = c.getSharedReceiveQueue();
		String srqPath = path + ".shared-receive-queue";
		if (!srq.isEnabled()) {
			return;
		}
		if (!server) {
			throw new RdmaConfigurationException(srqPath + ".enabled",
					srqPath + ".enabled=true is for a server; a client has one peer and receives on its own queue",
					"Remove " + srqPath + ".enabled (or set it on the server's connection, the one with listen).");
		}
		range(srqPath + ".depth", srq.getDepth(), 1, MAX_DEPTH, "512");
		bufferBytes(path, "shared-receive-queue.depth", srq.getDepth(), c.getMessageSize());
		if (srq.getLimit() != null) {
			range(srqPath + ".limit", srq.getLimit(), 0, srq.getDepth() - 1,
					"below depth (" + srq.getDepth() + "), or 0 for no limit");
		}
	}

	/** 0 (no region) up to {@link #MAX_REMOTE_ACCESS_SIZE}. */
	private static void remoteAccessSize(String path, @Nullable DataSize value) {
		if (value == null || value.isNegative() || value.toBytes() > MAX_REMOTE_ACCESS_SIZE) {
			throw new RdmaConfigurationException(path, path + "=" + value + " must be between 0B (no region) and 1GB",
					"Set " + path + " to e.g. 1MB, or 0 for no region the peer can write and read.");
		}
	}

	private static void positive(String path, @Nullable Duration value, String example) {
		if (value == null || value.isNegative() || value.isZero()) {
			throw new RdmaConfigurationException(path, path + "=" + value + " must be positive",
					"Set " + path + " to e.g. " + example + ".");
		}
		RdmaPropertiesValidator.notTooLong(path, value, example);
	}

}
