package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CqCreateFlag;
import dev.rdma.verbs.efa.EfaWcFlag;
import dev.rdma.verbs.WcExFlag;

/**
 * RDMA devices, completion channels and completion queues, each created as a bean named
 * after its key.
 *
 * <pre>
 * rdma:
 *   devices:
 *     nic0: { name: mlx5_0, port: 1 }
 *   channels:
 *     events0: { device: nic0 }
 *   completion-queues:
 *     rx: { device: nic0, type: extended, entries: 4096, channel: events0, poller: conns }
 *   pollers:
 *     conns: { threads: 2, mode: event, batch-budget: 256 }
 * </pre>
 */
@ConfigurationProperties(prefix = RdmaProperties.PREFIX)
public class RdmaProperties {

	public static final String PREFIX = "rdma";

	/**
	 * Whether RDMA is required: true fails startup when libibverbs or an RDMA device is
	 * missing; false lets the auto-configuration back off (no RDMA beans) on such a host.
	 */
	private boolean required = false;

	/**
	 * How long stopping a completion-queue poller waits for its in-flight batch (listener
	 * calls included) before shutdown proceeds.
	 */
	private Duration shutdownTimeout = Duration.ofSeconds(5);

	/**
	 * Devices to open, by bean name (the key, e.g. nic0). Each becomes a
	 * dev.rdma.verbs.Context bean. Properties of each device: name, guid, port.
	 */
	private Map<String, DeviceProperties> devices = new LinkedHashMap<>();

	/**
	 * Completion event channels, by bean name (the key, e.g. events0). Each becomes a
	 * dev.rdma.verbs.CompletionChannel bean. Properties of each channel: device,
	 * non-blocking.
	 */
	private Map<String, ChannelProperties> channels = new LinkedHashMap<>();

	/**
	 * Completion queues, by bean name (the key, e.g. rx). Each becomes a
	 * dev.rdma.verbs.CompletionQueue bean (ExtendedCompletionQueue or EfaCompletionQueue
	 * for those types). Properties of each queue: device, type, entries, comp-vector,
	 * channel, wc-flags, flags, efa-wc-flags, polling.mode, polling.batch-size,
	 * polling.spin, polling.max-sleep, ack-batch, poller.
	 */
	private Map<String, CompletionQueueProperties> completionQueues = new LinkedHashMap<>();

	/**
	 * Poller groups, by name: threads shared by the listeners of many completion queues
	 * (a queue joins one with its poller property). The group 'default' exists without
	 * being configured (1 thread, event mode). Properties of each group: threads, mode,
	 * spin, batch-budget.
	 */
	private Map<String, PollerProperties> pollers = new LinkedHashMap<>();

	public Map<String, PollerProperties> getPollers() {
		return pollers;
	}

	public void setPollers(Map<String, PollerProperties> pollers) {
		this.pollers = pollers;
	}

	public boolean isRequired() {
		return required;
	}

	public void setRequired(boolean required) {
		this.required = required;
	}

	public Duration getShutdownTimeout() {
		return shutdownTimeout;
	}

	public void setShutdownTimeout(Duration shutdownTimeout) {
		this.shutdownTimeout = shutdownTimeout;
	}

	public Map<String, DeviceProperties> getDevices() {
		return devices;
	}

	public void setDevices(Map<String, DeviceProperties> devices) {
		this.devices = devices;
	}

	public Map<String, ChannelProperties> getChannels() {
		return channels;
	}

	public void setChannels(Map<String, ChannelProperties> channels) {
		this.channels = channels;
	}

	public Map<String, CompletionQueueProperties> getCompletionQueues() {
		return completionQueues;
	}

	public void setCompletionQueues(Map<String, CompletionQueueProperties> completionQueues) {
		this.completionQueues = completionQueues;
	}

	/** An RDMA device to open ({@code ibv_open_device}). */
	@ConfigurationPropertiesSource
	public static class DeviceProperties {

		/**
		 * Device name as ibv_devices lists it, e.g. mlx5_0 or rxe0. Omit both name and
		 * guid for the first device.
		 */
		private @Nullable String name;

		/**
		 * Node GUID of the device in hex as ibv_devices prints it, e.g.
		 * 0x505400fffe727865. Alternative to name.
		 */
		private @Nullable String guid;

		/** Port whose state the health indicator reports (1-based). */
		private int port = 1;

		public @Nullable String getName() {
			return name;
		}

		public void setName(@Nullable String name) {
			this.name = name;
		}

		public @Nullable String getGuid() {
			return guid;
		}

		public void setGuid(@Nullable String guid) {
			this.guid = guid;
		}

		public int getPort() {
			return port;
		}

		public void setPort(int port) {
			this.port = port;
		}

	}

	/** A completion event channel ({@code ibv_create_comp_channel}). */
	@ConfigurationPropertiesSource
	public static class ChannelProperties {

		/**
		 * Key of the device (under rdma.devices) the channel belongs to. May be omitted
		 * when exactly one device is configured.
		 */
		private @Nullable String device;

		/**
		 * Whether the channel fd is non-blocking. Must be true: pollers wait with poll(2)
		 * and a timeout so that shutdown never hangs inside read(2).
		 */
		private boolean nonBlocking = true;

		public @Nullable String getDevice() {
			return device;
		}

		public void setDevice(@Nullable String device) {
			this.device = device;
		}

		public boolean isNonBlocking() {
			return nonBlocking;
		}

		public void setNonBlocking(boolean nonBlocking) {
			this.nonBlocking = nonBlocking;
		}

	}

	/** Kind of completion queue. */
	public enum QueueType {

		/** {@code ibv_create_cq}, polled with {@code ibv_poll_cq}. */
		LEGACY,
		/**
		 * {@code ibv_create_cq_ex}, polled with the start/next/end iterator; fields
		 * chosen with wc-flags.
		 */
		EXTENDED,
		/** {@code efadv_create_cq} (AWS EFA devices only). */
		EFA

	}

	/**
	 * Fields an EFA CQ provides on top of the wc-flags
	 * ({@code efadv_cq_init_attr.wc_flags}).
	 */
	public enum EfaWcField {

		/** The source GID of a completion whose address handle is unknown. */
		SGID(EfaWcFlag.SGID),
		/** Whether a receive completion is unsolicited (rdma-core 52+). */
		UNSOLICITED(EfaWcFlag.IS_UNSOLICITED);

		private final EfaWcFlag flag;

		EfaWcField(EfaWcFlag flag) {
			this.flag = flag;
		}

		public EfaWcFlag flag() {
			return flag;
		}

	}

	/** A completion queue. */
	@ConfigurationPropertiesSource
	public static class CompletionQueueProperties {

		/**
		 * Key of the device (under rdma.devices). May be omitted when exactly one device
		 * is configured.
		 */
		private @Nullable String device;

		/**
		 * Kind of CQ: legacy (ibv_create_cq), extended (ibv_create_cq_ex) or efa
		 * (efadv_create_cq).
		 */
		private QueueType type = QueueType.LEGACY;

		/**
		 * Minimum number of entries; the provider may round up (the bean's cqe() is the
		 * actual size). At most the device's max_cqe.
		 */
		private int entries = 1024;

		/**
		 * Completion vector: auto (round robin over the device's num_comp_vectors) or a
		 * number 0 .. num_comp_vectors - 1.
		 */
		private String compVector = "auto";

		/**
		 * Key of the completion channel (under rdma.channels); omitted = no completion
		 * events (polled in backoff or busy mode).
		 */
		private @Nullable String channel;

		/**
		 * Completion fields an extended or efa CQ provides (ibv_create_cq_ex wc_flags).
		 * Defaults to the standard fields (byte-len .. dlid-path-bits).
		 */
		private Set<WcExFlag> wcFlags = new LinkedHashSet<>();

		/** Creation flags of an extended or efa CQ. */
		private Set<CqCreateFlag> flags = new LinkedHashSet<>();

		/** EFA-specific completion fields (efa type only). */
		private Set<EfaWcField> efaWcFlags = new LinkedHashSet<>();

		/**
		 * Which poller runs this queue's listener: a group under rdma.pollers, 'default'
		 * (the default group), or 'dedicated' (a thread of its own). Omitted: the default
		 * group when the queue has a channel and sets no polling.mode, else dedicated.
		 */
		private @Nullable String poller;

		/**
		 * How the dedicated poller of this queue waits for completions (a group's queues
		 * use the group's mode; batch-size applies to both).
		 */
		private final Polling polling = new Polling();

		/**
		 * Number of completion events acknowledged together (ibv_ack_cq_events); all are
		 * acked before the CQ is destroyed.
		 */
		private int ackBatch = 64;

		public @Nullable String getDevice() {
			return device;
		}

		public void setDevice(@Nullable String device) {
			this.device = device;
		}

		public QueueType getType() {
			return type;
		}

		public void setType(QueueType type) {
			this.type = type;
		}

		public int getEntries() {
			return entries;
		}

		public void setEntries(int entries) {
			this.entries = entries;
		}

		public String getCompVector() {
			return compVector;
		}

		public void setCompVector(String compVector) {
			this.compVector = compVector;
		}

		public @Nullable String getChannel() {
			return channel;
		}

		public void setChannel(@Nullable String channel) {
			this.channel = channel;
		}

		public Set<WcExFlag> getWcFlags() {
			return wcFlags;
		}

		public void setWcFlags(Set<WcExFlag> wcFlags) {
			this.wcFlags = wcFlags;
		}

		public Set<CqCreateFlag> getFlags() {
			return flags;
		}

		public void setFlags(Set<CqCreateFlag> flags) {
			this.flags = flags;
		}

		public Set<EfaWcField> getEfaWcFlags() {
			return efaWcFlags;
		}

		public void setEfaWcFlags(Set<EfaWcField> efaWcFlags) {
			this.efaWcFlags = efaWcFlags;
		}

		public Polling getPolling() {
			return polling;
		}

		public @Nullable String getPoller() {
			return poller;
		}

		public void setPoller(@Nullable String poller) {
			this.poller = poller;
		}

		public int getAckBatch() {
			return ackBatch;
		}

		public void setAckBatch(int ackBatch) {
			this.ackBatch = ackBatch;
		}

	}

	/** A poller group: threads shared by the listeners of many completion queues. */
	@ConfigurationPropertiesSource
	public static class PollerProperties {

		/**
		 * Threads of the group; each owns the queues assigned to it (balanced, by
		 * completion vector where the device has several) until they stop.
		 */
		private int threads = 1;

		/**
		 * Polling mode of every queue of the group: event (one epoll_wait for all of a
		 * thread's channels), busy (spin over all of a thread's queues) or adaptive
		 * (backoff is a dedicated poller's mode).
		 */
		private PollingMode mode = PollingMode.EVENT;

		/**
		 * Adaptive mode: how long a thread keeps spinning over its queues after the last
		 * completion before it arms them and waits.
		 */
		private Duration spin = Duration.ofNanos(50_000);

		/**
		 * Most completions taken from one queue per turn (rounded up to whole polls of
		 * its batch-size), so that one flooded queue cannot starve the others.
		 */
		private int batchBudget = 256;

		public int getThreads() {
			return threads;
		}

		public void setThreads(int threads) {
			this.threads = threads;
		}

		public PollingMode getMode() {
			return mode;
		}

		public void setMode(PollingMode mode) {
			this.mode = mode;
		}

		public Duration getSpin() {
			return spin;
		}

		public void setSpin(Duration spin) {
			this.spin = spin;
		}

		public int getBatchBudget() {
			return batchBudget;
		}

		public void setBatchBudget(int batchBudget) {
			this.batchBudget = batchBudget;
		}

	}

	/** Polling of a completion queue by its listener's poller thread. */
	@ConfigurationPropertiesSource
	public static class Polling {

		/**
		 * Polling mode: busy (spins, one core per queue), event or adaptive (need a
		 * channel), backoff (sleeps when idle). Omitted = event when the queue has a
		 * channel, else backoff; busy only when set.
		 */
		private @Nullable PollingMode mode;

		/**
		 * Most completions taken per poll (ibv_poll_cq num_entries) and handed to a batch
		 * listener at once.
		 */
		private int batchSize = 32;

		/**
		 * Adaptive mode: how long to keep spinning after the last completion before
		 * waiting on the channel.
		 */
		private Duration spin = Duration.ofNanos(50_000);

		/**
		 * Backoff mode: the longest pause between two polls of an idle queue; the pauses
		 * double up to it, so an idle poller costs next to no CPU and a completion waits
		 * at most about this long.
		 */
		private Duration maxSleep = Duration.ofMillis(1);

		public @Nullable PollingMode getMode() {
			return mode;
		}

		public void setMode(@Nullable PollingMode mode) {
			this.mode = mode;
		}

		public int getBatchSize() {
			return batchSize;
		}

		public void setBatchSize(int batchSize) {
			this.batchSize = batchSize;
		}

		public Duration getSpin() {
			return spin;
		}

		public void setSpin(Duration spin) {
			this.spin = spin;
		}

		public Duration getMaxSleep() {
			return maxSleep;
		}

		public void setMaxSleep(Duration maxSleep) {
			this.maxSleep = maxSleep;
		}

	}

}
