package dev.rdma.spring.boot.autoconfigure;

import java.util.Collections;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.NoSuchElementException;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.BeanFactory;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.BitFlag;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.Device;
import dev.rdma.verbs.DeviceAttributes;
import dev.rdma.verbs.DeviceFiles;
import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.efa.EfaCompletionQueue;
import dev.rdma.verbs.efa.EfaWcFlag;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.LockedMemory;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.RdmaException;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.WcExFlag;

/**
 * Creates the configured devices, channels and completion queues for their beans,
 * checking what only the device can tell (device names, max_cqe, num_comp_vectors, ports,
 * and the connections' limits: {@link RdmaConnectionLimits}), and remembers what it
 * created. It never closes anything: each bean is closed by the container, dependants
 * first (queues, then channels, then contexts).
 */
public class RdmaResources {

	/** Bean name of this class. */
	public static final String BEAN_NAME = "rdmaResources";

	private static final Log logger = LogFactory.getLog(RdmaResources.class);

	private final RdmaProperties properties;

	private final BeanFactory beanFactory;

	private final Map<String, Context> contexts = Collections.synchronizedMap(new LinkedHashMap<>());

	private final Map<String, CompletionChannel> channels = Collections.synchronizedMap(new LinkedHashMap<>());

	private final Map<String, CompletionQueue> queues = Collections.synchronizedMap(new LinkedHashMap<>());

	private final Map<CompletionQueue, String> queueNames = Collections.synchronizedMap(new IdentityHashMap<>());

	private final Map<String, Integer> nextVector = new HashMap<>();

	private final PinnedMemory pinnedMemory;

	private boolean memoryChecked;

	public RdmaResources(RdmaProperties properties, BeanFactory beanFactory) {
		this.properties = properties;
		this.beanFactory = beanFactory;
		this.pinnedMemory = PinnedMemory.of(properties);
	}

	/** What the configuration pins in locked memory at most. */
	public PinnedMemory pinnedMemory() {
		return pinnedMemory;
	}

	/**
	 * Before the first device is opened: fails when the configuration's locked memory
	 * exceeds the process's limit, warns when it comes close ({@link PinnedMemory}).
	 */
	private void checkLockedMemory() {
		synchronized (pinnedMemory) {
			if (memoryChecked) {
				return;
			}
			memoryChecked = true;
		}
		String warning = pinnedMemory.check(LockedMemory.current());
		if (warning != null) {
			logger.warn(warning);
		}
	}

	/**
	 * The failure of a device whose file this process may not open (the open failed with
	 * {@code cause}, or {@link RdmaPreflight} found the file closed before the open).
	 */
	static RdmaConfigurationException noAccess(String path, String deviceName, @Nullable Throwable cause) {
		return new RdmaConfigurationException(path,
				"opening device " + deviceName + " for " + path + " failed: no access to its device file",
				"Let the process open it: " + DeviceFiles.explainAccess(DeviceFiles.uverbs(deviceName)) + ".", cause);
	}

	public RdmaProperties properties() {
		return properties;
	}

	/** Opens the device of {@code rdma.devices.<key>}. */
	public Context openDevice(String key) {
		checkLockedMemory();
		String path = RdmaPropertiesValidator.DEVICES + key;
		DeviceProperties config = properties.getDevices().get(key);
		Context context;
		try (DeviceList list = DeviceList.open()) {
			Device device;
			if (config.getGuid() != null) {
				long guid = RdmaPropertiesValidator.parseGuid(path + ".guid", config.getGuid());
				device = list.byGuid(guid)
					.orElseThrow(() -> new RdmaConfigurationException(
							path + ".guid", path + ".guid=" + config.getGuid() + " matches no RDMA device (devices: "
									+ describe(list) + ")",
							"Set " + path + ".guid to the node GUID of one of " + describe(list) + "."));
			}
			else if (config.getName() != null) {
				device = list.byName(config.getName())
					.orElseThrow(() -> new RdmaConfigurationException(path + ".name",
							path + ".name=" + config.getName() + " matches no RDMA device (devices: " + describe(list)
									+ ")",
							"Set " + path + ".name to one of " + describe(list) + " (see ibv_devices)."));
			}
			else {
				device = list.devices()
					.stream()
					.findFirst()
					.orElseThrow(() -> new RdmaConfigurationException(path,
							path + " asks for the first RDMA device, but there is none",
							"Load an RDMA driver (e.g. rdma link add rxe0 type rxe netdev eth0) or set rdma.required=false."));
			}
			try {
				context = device.open();
			}
			catch (RdmaException ex) {
				if (ex instanceof VerbsException v
						&& DeviceFiles.isAccessDenied(v.errno(), DeviceFiles.uverbs(device.name()))) {
					throw noAccess(path, device.name(), ex);
				}
				throw new RdmaConfigurationException(path,
						"opening device " + device.name() + " for " + path + " failed",
						"Check the permissions of /dev/infiniband/uverbs* and the device's driver.", ex);
			}
		}
		catch (RdmaConfigurationException | NoSuchElementException ex) {
			throw ex;
		}
		catch (RdmaException ex) {
			throw new RdmaConfigurationException(path, "listing RDMA devices for " + path + " failed",
					"Check that libibverbs and the RDMA drivers are installed.", ex);
		}
		try {
			DeviceAttributes attributes = context.queryDevice();
			if (config.getPort() > attributes.physPortCount()) {
				throw new RdmaConfigurationException(path + ".port",
						path + ".port=" + config.getPort() + " exceeds the " + attributes.physPortCount()
								+ " port(s) of device " + context.deviceName(),
						"Set " + path + ".port between 1 and " + attributes.physPortCount() + ".");
			}
			// the connections whose queues are on this device: before any of them exists
			RdmaConnectionLimits.check(properties, key, deviceView(context));
		}
		catch (RuntimeException ex) {
			context.close();
			throw ex instanceof RdmaConfigurationException rce ? rce
					: new RdmaConfigurationException(path,
							"querying device " + context.deviceName() + " for " + path + " failed",
							"Check the device's driver.", ex);
		}
		contexts.put(key, context);
		// the startup report (RdmaStartupReport) logs each device, channel and queue at
		// INFO
		logger.debug("Opened RDMA device " + context.deviceName() + " as bean '" + key + "'");
		return context;
	}

	/** The view of an open device that {@link RdmaConnectionLimits} checks against. */
	static RdmaConnectionLimits.DeviceView deviceView(Context context) {
		return new RdmaConnectionLimits.DeviceView() {

			@Override
			public String name() {
				return context.deviceName();
			}

			@Override
			public DeviceAttributes attributes() {
				return context.queryDevice();
			}

			@Override
			public PortAttributes port(int port) {
				return context.queryPort(port);
			}

			@Override
			public @Nullable Gid gid(int port, int index) {
				try {
					return context.queryGid(port, index);
				}
				catch (VerbsException ex) {
					return null; // an empty or absent entry
				}
			}

		};
	}

	private static String describe(DeviceList list) {
		return list.devices().stream().map(d -> d.name() + " " + d.guidString()).toList().toString();
	}

	/** Creates the channel of {@code rdma.channels.<key>}. */
	public CompletionChannel createChannel(String key) {
		String path = RdmaPropertiesValidator.CHANNELS + key;
		String deviceKey = RdmaPropertiesValidator.resolveDevice(properties, path,
				properties.getChannels().get(key).getDevice());
		Context context = beanFactory.getBean(deviceKey, Context.class);
		try {
			CompletionChannel channel = context.createCompletionChannel();
			channels.put(key, channel);
			return channel;
		}
		catch (RdmaException ex) {
			throw new RdmaConfigurationException(path,
					"creating completion channel " + key + " on device " + context.deviceName() + " failed",
					"Check the open file limit and the device's driver.", ex);
		}
	}

	/** Creates the completion queue of {@code rdma.completion-queues.<key>}. */
	public CompletionQueue createQueue(String key) {
		String path = RdmaPropertiesValidator.QUEUES + key;
		CompletionQueueProperties config = properties.getCompletionQueues().get(key);
		String deviceKey = RdmaPropertiesValidator.resolveDevice(properties, path, config.getDevice());
		Context context = beanFactory.getBean(deviceKey, Context.class);
		String channelKey = config.getChannel();
		CompletionChannel channel = channelKey == null ? null
				: beanFactory.getBean(channelKey, CompletionChannel.class);
		DeviceAttributes attributes = context.queryDevice();
		if (config.getEntries() > attributes.maxCqe()) {
			throw new RdmaConfigurationException(
					path + ".entries", path + ".entries=" + config.getEntries() + " exceeds max_cqe "
							+ attributes.maxCqe() + " of device " + context.deviceName(),
					"Set " + path + ".entries to at most " + attributes.maxCqe() + ".");
		}
		int vectors = Math.max(1, context.numCompVectors());
		int vector = RdmaPropertiesValidator.compVector(path, config);
		if (vector >= vectors) {
			throw new RdmaConfigurationException(path + ".comp-vector",
					path + ".comp-vector=" + vector + " is not below num_comp_vectors " + context.numCompVectors()
							+ " of device " + context.deviceName(),
					"Set " + path + ".comp-vector to auto or to a number between 0 and " + (vectors - 1) + ".");
		}
		if (vector < 0) {
			synchronized (nextVector) {
				int next = nextVector.getOrDefault(deviceKey, 0);
				vector = next % vectors;
				nextVector.put(deviceKey, next + 1);
			}
		}
		if (config.getType() == QueueType.EFA && !Rdma.isEfaAvailable()) {
			throw new RdmaConfigurationException(path + ".type",
					path + ".type=efa needs libefa.so.1, which is not installed",
					"Install ibverbs-providers (libefa) on an EFA host, or use type legacy or extended.");
		}
		CompletionQueue queue;
		try {
			queue = switch (config.getType()) {
				case LEGACY -> context.createCompletionQueue(config.getEntries(), channel, vector);
				case EXTENDED -> context.createExtendedCompletionQueue(attributes(config, channel, vector));
				case EFA -> EfaCompletionQueue.create(context, attributes(config, channel, vector), efaFlags(config));
			};
		}
		catch (RdmaException ex) {
			throw new RdmaConfigurationException(path,
					"creating completion queue " + key + " (type " + config.getType().name().toLowerCase(Locale.ROOT)
							+ ", entries " + config.getEntries() + ", comp-vector " + vector + ") on device "
							+ context.deviceName() + " failed",
					"Check " + path + ".type, .wc-flags and .flags against what device " + context.deviceName()
							+ " supports (ibv_devinfo -v).",
					ex);
		}
		queues.put(key, queue);
		queueNames.put(queue, key);
		logger.debug("Created completion queue '" + key + "' " + queue + " on " + context.deviceName());
		return queue;
	}

	private static CqInitAttributes attributes(CompletionQueueProperties config, @Nullable CompletionChannel channel,
			int vector) {
		CqInitAttributes attributes = CqInitAttributes.of(config.getEntries())
			.withChannel(channel)
			.withCompVector(vector);
		if (!config.getWcFlags().isEmpty()) {
			attributes = attributes.withWcFlags(EnumSet.copyOf(config.getWcFlags()));
		}
		if (!config.getFlags().isEmpty()) {
			attributes = attributes.withFlags(EnumSet.copyOf(config.getFlags()));
		}
		return attributes;
	}

	private static EnumSet<EfaWcFlag> efaFlags(CompletionQueueProperties config) {
		EnumSet<EfaWcFlag> flags = EnumSet.noneOf(EfaWcFlag.class);
		for (EfaWcField field : config.getEfaWcFlags()) {
			flags.add(field.flag());
		}
		return flags;
	}

	/**
	 * The wc-flags a queue provides: the configured ones, the standard fields for legacy
	 * queues or when none are set.
	 */
	public static long providedWcFlags(CompletionQueueProperties config) {
		if (config.getType() == QueueType.LEGACY || config.getWcFlags().isEmpty()) {
			return WcExFlag.STANDARD;
		}
		return BitFlag.mask(config.getWcFlags());
	}

	/** The contexts opened so far, by key. */
	public Map<String, Context> contexts() {
		synchronized (contexts) {
			return new LinkedHashMap<>(contexts);
		}
	}

	/** The channels created so far, by key. */
	public Map<String, CompletionChannel> channels() {
		synchronized (channels) {
			return new LinkedHashMap<>(channels);
		}
	}

	/** The queues created so far, by key. */
	public Map<String, CompletionQueue> queues() {
		synchronized (queues) {
			return new LinkedHashMap<>(queues);
		}
	}

	/** The key of a queue this class created, or null. */
	public @Nullable String queueName(@Nullable CompletionQueue queue) {
		return queue == null ? null : queueNames.get(queue);
	}

	/** The device key of a configured queue. */
	public String deviceKeyOfQueue(String queueKey) {
		return RdmaPropertiesValidator.resolveDevice(properties, RdmaPropertiesValidator.QUEUES + queueKey,
				properties.getCompletionQueues().get(queueKey).getDevice());
	}

}
