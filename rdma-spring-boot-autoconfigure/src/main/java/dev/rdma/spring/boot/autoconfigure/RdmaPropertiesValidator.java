package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollingMode;

/**
 * Checks {@link RdmaProperties} before anything native is touched: references between
 * devices, channels and queues, ranges, and options that do not fit the queue type.
 * Throws {@link RdmaConfigurationException} naming the property. The checks that need the
 * device (max_cqe, num_comp_vectors, device names) run in {@link RdmaResources}.
 */
public final class RdmaPropertiesValidator {

	static final String DEVICES = RdmaProperties.PREFIX + ".devices.";
	static final String CHANNELS = RdmaProperties.PREFIX + ".channels.";
	static final String QUEUES = RdmaProperties.PREFIX + ".completion-queues.";
	static final String POLLERS = RdmaProperties.PREFIX + ".pollers.";

	/**
	 * The starter's own bean names and what they are: a device, channel or queue key
	 * cannot be one of them (whether or not that bean exists in this application, as
	 * health and metrics depend on the class path).
	 */
	static final Map<String, String> STARTER_BEANS = Map.ofEntries(
			Map.entry("rdmaHealthIndicator", "the rdma health indicator"),
			Map.entry("rdmaPollerMetrics", "the pollers' Micrometer meters"),
			Map.entry("rdmaStatus", "the RdmaStatus bean"), Map.entry("rdmaResources", "the RDMA resources"),
			Map.entry("rdmaAsyncEventMonitor", "the asynchronous event monitor"),
			Map.entry("rdmaStartupReport", "the startup report"),
			Map.entry("rdmaListenerEndpointRegistry", "the listener registry"),
			Map.entry("rdmaListenerContainerFactory", "the listener container factory"),
			Map.entry("rdmaListenerContainerFactoryConfigurer", "the listener container factory's configurer"),
			Map.entry("rdmaListenerEndpointValidator", "the listener check"),
			Map.entry("rdmaCompletionListenerAnnotationBeanPostProcessor", "the listener post-processor"),
			Map.entry("rdmaCompletionListenerCheck", "the listener check"),
			Map.entry("rdmaMessageListenerCheck", "the message listener check"),
			Map.entry("rdmaConnectionRegistry", "the connection registry"),
			Map.entry("rdmaMessageListenerAnnotationBeanPostProcessor", "the message listener post-processor"),
			Map.entry("rdmaConnectionMetrics", "the connections' Micrometer meters"),
			Map.entry("rdmaMemoryMetrics", "the locked-memory gauges"),
			Map.entry("rdmaListenerLazyInitializationExcludeFilter", "the listener beans' lazy-initialization filter"));

	/**
	 * The longest duration any {@code rdma.*} property accepts: longer ones are mistakes
	 * (a spin, a timeout or a retry interval of days), and some would overflow the
	 * nanoseconds the pollers and connections count in.
	 */
	public static final Duration MAX_DURATION = Duration.ofDays(1);

	private RdmaPropertiesValidator() {
	}

	/**
	 * Fails, naming {@code path}, when {@code value} is longer than
	 * {@link #MAX_DURATION}.
	 */
	static void notTooLong(String path, @Nullable Duration value, String example) {
		if (value != null && value.compareTo(MAX_DURATION) > 0) {
			throw new RdmaConfigurationException(path, path + "=" + value + " is longer than " + MAX_DURATION.toHours()
					+ "h, the longest an rdma.* duration may be", "Set " + path + " to e.g. " + example + ".");
		}
	}

	/**
	 * @param properties the bound properties
	 * @param beanNameTaken true for a name that some other bean already has
	 */
	public static void validate(RdmaProperties properties, Predicate<String> beanNameTaken) {
		if (properties.getShutdownTimeout() == null || properties.getShutdownTimeout().isNegative()) {
			throw new RdmaConfigurationException("rdma.shutdown-timeout",
					"rdma.shutdown-timeout=" + properties.getShutdownTimeout() + " must not be negative",
					"Set rdma.shutdown-timeout to a duration such as 5s.");
		}
		notTooLong("rdma.shutdown-timeout", properties.getShutdownTimeout(), "5s");
		Map<String, String> owners = new HashMap<>();
		properties.getDevices().keySet().forEach(k -> claim(owners, k, DEVICES + k, beanNameTaken));
		properties.getChannels().keySet().forEach(k -> claim(owners, k, CHANNELS + k, beanNameTaken));
		properties.getCompletionQueues().keySet().forEach(k -> claim(owners, k, QUEUES + k, beanNameTaken));
		properties.getConnections()
			.keySet()
			.forEach(k -> claim(owners, k, RdmaConnectionProperties.CONNECTIONS + k, beanNameTaken));

		properties.getDevices().forEach(RdmaPropertiesValidator::validateDevice);
		properties.getChannels().forEach((key, channel) -> validateChannel(properties, key, channel));
		properties.getPollers().forEach(RdmaPropertiesValidator::validatePoller);
		properties.getCompletionQueues().forEach((key, queue) -> validateQueue(properties, key, queue));
		properties.getCompletionQueues().forEach((key, queue) -> validateQueuePoller(properties, key, queue));
		RdmaConnectionProperties.validate(properties);
	}

	private static void validatePoller(String key, PollerProperties poller) {
		String path = POLLERS + key;
		if (key.equals(PollerGroup.DEDICATED)) {
			throw new RdmaConfigurationException(path,
					path + ": '" + PollerGroup.DEDICATED
							+ "' is not a group name: a queue with poller=dedicated gets a thread of its own",
					"Give the group another name.");
		}
		if (poller.getThreads() < 1 || poller.getThreads() > 1024) {
			throw new RdmaConfigurationException(path + ".threads",
					path + ".threads=" + poller.getThreads() + " must be between 1 and 1024",
					"Set " + path + ".threads to e.g. 2.");
		}
		if (poller.getMode() == null) {
			throw new RdmaConfigurationException(path + ".mode", path + ".mode must be set",
					"Set " + path + ".mode to event, busy or adaptive.");
		}
		if (poller.getMode() == PollingMode.BACKOFF) {
			throw new RdmaConfigurationException(path + ".mode",
					path + ".mode=backoff is the mode of a dedicated poller (one queue sleeping between polls)",
					"Set " + path + ".mode to event, busy or adaptive.");
		}
		if (poller.getSpin() == null || poller.getSpin().isNegative()) {
			throw new RdmaConfigurationException(path + ".spin",
					path + ".spin=" + poller.getSpin() + " must not be negative",
					"Set " + path + ".spin to e.g. 50us.");
		}
		notTooLong(path + ".spin", poller.getSpin(), "50us");
		PollerPlacement.validateCpus(path + ".cpus", poller.getCpus());
		if (poller.getBatchBudget() < 1) {
			throw new RdmaConfigurationException(path + ".batch-budget",
					path + ".batch-budget=" + poller.getBatchBudget() + " must be at least 1",
					"Set " + path + ".batch-budget to e.g. 256.");
		}
	}

	private static void validateQueuePoller(RdmaProperties properties, String key, CompletionQueueProperties queue) {
		String path = QUEUES + key;
		String poller = queue.getPoller();
		if (poller != null && poller.isBlank()) {
			throw new RdmaConfigurationException(path + ".poller", path + ".poller must not be blank",
					"Set " + path + ".poller to a group under rdma.pollers, default or dedicated, or remove it.");
		}
		String group = effectivePoller(queue);
		if (group == null) {
			return;
		}
		PollerProperties configured = properties.getPollers().get(group);
		if (configured == null && !group.equals(PollerGroup.DEFAULT)) {
			throw new RdmaConfigurationException(path + ".poller",
					path + ".poller=" + group + " names no poller group under rdma.pollers (configured: "
							+ properties.getPollers().keySet() + ")",
					"Add rdma.pollers." + group + ".threads, or set " + path + ".poller to default or dedicated.");
		}
		PollingMode groupMode = configured == null ? PollingMode.EVENT : configured.getMode();
		if (queue.getPolling().getMode() != null) {
			throw new RdmaConfigurationException(path + ".polling.mode",
					path + ".polling.mode=" + queue.getPolling().getMode().name().toLowerCase(java.util.Locale.ROOT)
							+ " is the mode of a dedicated poller, but the queue is polled by poller group '" + group
							+ "' (whose mode is " + POLLERS + group + ".mode)",
					"Remove " + path + ".polling.mode, or set " + path + ".poller=dedicated.");
		}
		if (groupMode != PollingMode.BUSY && queue.getChannel() == null) {
			throw new RdmaConfigurationException(path + ".channel",
					path + " is polled by poller group '" + group + "' in "
							+ groupMode.name().toLowerCase(java.util.Locale.ROOT)
							+ " mode, which waits on completion channels, but " + path + ".channel is not set",
					"Set " + path + ".channel to a channel under rdma.channels, or " + path + ".poller=dedicated.");
		}
	}

	/**
	 * The poller group of a queue, or null for a dedicated poller: the configured
	 * {@code poller} ({@code dedicated} = null); when omitted, the default group for a
	 * queue with a channel and no polling mode of its own (it can wait on events with
	 * others), else dedicated (a queue without a channel cannot wait on events, and a
	 * mode set on the queue asks for a poller of that mode).
	 */
	public static @Nullable String effectivePoller(CompletionQueueProperties queue) {
		String poller = queue.getPoller();
		if (poller != null) {
			String trimmed = poller.trim();
			return trimmed.equals(PollerGroup.DEDICATED) ? null : trimmed;
		}
		if (queue.getChannel() != null && queue.getPolling().getMode() == null) {
			return PollerGroup.DEFAULT;
		}
		return null;
	}

	private static void claim(Map<String, String> owners, String key, String path, Predicate<String> beanNameTaken) {
		String previous = owners.putIfAbsent(key, path);
		if (previous != null) {
			throw new RdmaConfigurationException(path, path + " clashes with " + previous
					+ ": every device, channel, completion queue and connection becomes a bean named after its key",
					"Give " + path + " a key that no other RDMA resource uses.");
		}
		String starterBean = STARTER_BEANS.get(key);
		if (starterBean != null) {
			throw new RdmaConfigurationException(path,
					path + " would be a bean named '" + key + "', a name the starter keeps for its own bean ("
							+ starterBean + ")",
					"Rename " + path + ": the starter's own beans are named rdma<Something>.");
		}
		if (beanNameTaken.test(key)) {
			throw new RdmaConfigurationException(path,
					path + " would be a bean named '" + key
							+ "', but the application already defines a bean with that name",
					"Rename " + path + " or the other bean.");
		}
	}

	private static void validateDevice(String key, DeviceProperties device) {
		String path = DEVICES + key;
		if (device.getName() != null && device.getName().isBlank()) {
			throw new RdmaConfigurationException(path + ".name", path + ".name must not be blank", "Set " + path
					+ ".name to a device name listed by ibv_devices, or remove it to use the first device.");
		}
		if (device.getName() != null && device.getGuid() != null) {
			throw new RdmaConfigurationException(path + ".guid",
					path + " sets both name=" + device.getName() + " and guid=" + device.getGuid(),
					"Identify the device by either " + path + ".name or " + path + ".guid, not both.");
		}
		if (device.getGuid() != null) {
			parseGuid(path + ".guid", device.getGuid());
		}
		if (device.getPort() < 1) {
			throw new RdmaConfigurationException(path + ".port",
					path + ".port=" + device.getPort() + " is not a port number (ports are numbered from 1)",
					"Set " + path + ".port to 1 or higher.");
		}
	}

	/**
	 * Parses a node GUID written in hex ({@code 0x505400fffe727865}, also with colons as
	 * ibv_devinfo prints it).
	 */
	public static long parseGuid(String path, String guid) {
		String digits = guid.trim().replace(":", "");
		if (digits.startsWith("0x") || digits.startsWith("0X")) {
			digits = digits.substring(2);
		}
		if (digits.isEmpty() || digits.length() > 16 || !digits.chars().allMatch(c -> Character.digit(c, 16) >= 0)) {
			throw new RdmaConfigurationException(path, path + "=" + guid + " is not a 64-bit hex GUID",
					"Write the node GUID as ibv_devices prints it, e.g. 0x505400fffe727865.");
		}
		return Long.parseUnsignedLong(digits, 16);
	}

	private static void validateChannel(RdmaProperties properties, String key, ChannelProperties channel) {
		String path = CHANNELS + key;
		resolveDevice(properties, path, channel.getDevice());
		if (!channel.isNonBlocking()) {
			throw new RdmaConfigurationException(path + ".non-blocking", path + ".non-blocking=false is not supported:"
					+ " pollers wait on the channel with poll(2) and a timeout so that shutdown never blocks in read(2)",
					"Remove " + path + ".non-blocking or set it to true.");
		}
	}

	/** The device key a channel or queue belongs to; checks the reference. */
	static String resolveDevice(RdmaProperties properties, String path, @Nullable String device) {
		Set<String> devices = properties.getDevices().keySet();
		if (device == null || device.isBlank()) {
			if (devices.size() == 1) {
				return devices.iterator().next();
			}
			throw new RdmaConfigurationException(path + ".device",
					path + ".device is not set and "
							+ (devices.isEmpty() ? "no device is configured under rdma.devices"
									: devices.size() + " devices are configured " + devices),
					devices.isEmpty() ? "Add a device under rdma.devices (e.g. rdma.devices.nic0.name=mlx5_0)."
							: "Set " + path + ".device to one of " + devices + ".");
		}
		if (!devices.contains(device)) {
			throw new RdmaConfigurationException(path + ".device",
					path + ".device=" + device + " names no device under rdma.devices (configured: " + devices + ")",
					"Set " + path + ".device to one of " + devices + " or add rdma.devices." + device + ".");
		}
		return device;
	}

	private static void validateQueue(RdmaProperties properties, String key, CompletionQueueProperties queue) {
		String path = QUEUES + key;
		String device = resolveDevice(properties, path, queue.getDevice());
		if (queue.getType() == null) {
			throw new RdmaConfigurationException(path + ".type", path + ".type must be set",
					"Set " + path + ".type to legacy, extended or efa.");
		}
		if (queue.getEntries() < 1) {
			throw new RdmaConfigurationException(path + ".entries",
					path + ".entries=" + queue.getEntries() + " must be at least 1",
					"Set " + path + ".entries to the number of completions the queue must hold.");
		}
		compVector(path, queue);
		String channel = queue.getChannel();
		if (channel != null) {
			ChannelProperties c = properties.getChannels().get(channel);
			if (c == null) {
				throw new RdmaConfigurationException(path + ".channel",
						path + ".channel=" + channel + " names no channel under rdma.channels (configured: "
								+ properties.getChannels().keySet() + ")",
						"Set " + path + ".channel to a configured channel, add rdma.channels." + channel
								+ ", or remove it for a busy-polled queue.");
			}
			String channelDevice = resolveDevice(properties, CHANNELS + channel, c.getDevice());
			if (!channelDevice.equals(device)) {
				throw new RdmaConfigurationException(path + ".channel",
						path + ".channel=" + channel + " belongs to device " + channelDevice
								+ ", but the queue is on device " + device,
						"Use a channel of device " + device + " for " + path + ".");
			}
		}
		boolean extended = queue.getType() != QueueType.LEGACY;
		if (!extended && !queue.getWcFlags().isEmpty()) {
			throw new RdmaConfigurationException(path + ".wc-flags",
					path + ".wc-flags=" + yaml(queue.getWcFlags()) + " needs an extended or efa queue; " + path
							+ ".type is legacy",
					"Set " + path + ".type to extended, or remove " + path
							+ ".wc-flags (a legacy queue always provides the standard fields).");
		}
		if (!extended && !queue.getFlags().isEmpty()) {
			throw new RdmaConfigurationException(
					path + ".flags", path + ".flags=" + yaml(queue.getFlags()) + " needs an extended or efa queue; "
							+ path + ".type is legacy",
					"Set " + path + ".type to extended, or remove " + path + ".flags.");
		}
		if (queue.getType() != QueueType.EFA && !queue.getEfaWcFlags().isEmpty()) {
			throw new RdmaConfigurationException(path + ".efa-wc-flags",
					path + ".efa-wc-flags=" + yaml(queue.getEfaWcFlags()) + " needs an efa queue; " + path + ".type is "
							+ yaml(queue.getType()),
					"Set " + path + ".type to efa (EFA devices only), or remove " + path + ".efa-wc-flags.");
		}
		PollingMode mode = queue.getPolling().getMode();
		if (mode != null && mode.needsChannel() && channel == null) {
			throw new RdmaConfigurationException(path + ".polling.mode",
					path + ".polling.mode=" + yaml(mode) + " needs a completion channel, but " + path
							+ ".channel is not set",
					"Set " + path + ".channel to a channel under rdma.channels, or use " + path
							+ ".polling.mode=backoff (sleeps when idle) or busy (spins, one core).");
		}
		int batchSize = queue.getPolling().getBatchSize();
		if (batchSize < 1 || batchSize > 65536) {
			throw new RdmaConfigurationException(path + ".polling.batch-size",
					path + ".polling.batch-size=" + batchSize + " must be between 1 and 65536",
					"Set " + path + ".polling.batch-size to e.g. 32.");
		}
		if (queue.getPolling().getSpin() == null || queue.getPolling().getSpin().isNegative()) {
			throw new RdmaConfigurationException(path + ".polling.spin",
					path + ".polling.spin=" + queue.getPolling().getSpin() + " must not be negative",
					"Set " + path + ".polling.spin to e.g. 50us.");
		}
		notTooLong(path + ".polling.spin", queue.getPolling().getSpin(), "50us");
		Duration maxSleep = queue.getPolling().getMaxSleep();
		if (maxSleep == null || maxSleep.isNegative() || maxSleep.isZero()) {
			throw new RdmaConfigurationException(path + ".polling.max-sleep",
					path + ".polling.max-sleep=" + maxSleep + " must be positive",
					"Set " + path + ".polling.max-sleep to e.g. 1ms, or use " + path
							+ ".polling.mode=busy to poll without pauses.");
		}
		notTooLong(path + ".polling.max-sleep", maxSleep, "1ms");
		if (queue.getAckBatch() < 1) {
			throw new RdmaConfigurationException(path + ".ack-batch",
					path + ".ack-batch=" + queue.getAckBatch() + " must be at least 1",
					"Set " + path + ".ack-batch to e.g. 64.");
		}
	}

	/**
	 * A constant as it is written in YAML and properties files ({@code QP_NUM} is
	 * {@code qp-num}), so that messages quote what the user wrote.
	 */
	public static String yaml(Enum<?> constant) {
		return constant.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
	}

	/** Constants as a YAML list, e.g. {@code [byte-len, qp-num]}. */
	public static String yaml(java.util.Collection<? extends Enum<?>> constants) {
		return constants.stream().map(RdmaPropertiesValidator::yaml).toList().toString();
	}

	/** The explicit completion vector of a queue, or -1 for auto. */
	static int compVector(String path, CompletionQueueProperties queue) {
		String value = queue.getCompVector();
		if (value == null || value.isBlank() || value.trim().equalsIgnoreCase("auto")) {
			return -1;
		}
		try {
			int v = Integer.parseInt(value.trim());
			if (v >= 0) {
				return v;
			}
		}
		catch (NumberFormatException ex) {
			// reported below
		}
		throw new RdmaConfigurationException(path + ".comp-vector",
				path + ".comp-vector=" + value + " is neither auto nor a completion vector number (0 or more)",
				"Set " + path + ".comp-vector to auto or to a number below the device's num_comp_vectors.");
	}

	/**
	 * The polling mode a queue's poller uses: the configured one, else event with a
	 * channel, backoff without ({@link PollingMode#resolve}).
	 */
	public static PollingMode effectiveMode(CompletionQueueProperties queue) {
		return PollingMode.resolve(queue.getPolling().getMode(), queue.getChannel() != null);
	}

}
