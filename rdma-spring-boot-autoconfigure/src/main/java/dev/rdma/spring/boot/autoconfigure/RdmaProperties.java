package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.ConfigurationPropertiesSource;
import org.springframework.util.unit.DataSize;

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
	 * How long shutdown waits, at most a day: for the connections to disconnect and drain
	 * their work requests, then for the completion-queue pollers to finish their
	 * in-flight batch (listener calls included), before it proceeds.
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

	/**
	 * Connections to other applications over RDMA (rdma_cm, or an out-of-band TCP
	 * exchange), by bean name (the key, e.g. orders). Each becomes a
	 * dev.rdma.spring.connection.RdmaConnection bean; a server sets listen, a client
	 * connect. Properties of each connection: listen, connect, exchange, source,
	 * max-peers, connect-timeout, retry.initial-interval, retry.multiplier,
	 * retry.max-interval, retry.max-attempts, device, send-queue, receive-queue,
	 * send-depth, receive-depth, receive-buffers, message-size, send-timeout, required,
	 * remote-access-size, cm.responder-resources, cm.initiator-depth, cm.retry-count,
	 * cm.rnr-retry-count, out-of-band.port, out-of-band.gid-index, out-of-band.path-mtu.
	 */
	private Map<String, ConnectionProperties> connections = new LinkedHashMap<>();

	public Map<String, ConnectionProperties> getConnections() {
		return connections;
	}

	public void setConnections(Map<String, ConnectionProperties> connections) {
		this.connections = connections;
	}

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

	/**
	 * A connection to another application: an RC queue pair connected through rdma_cm,
	 * with registered send and receive buffers.
	 */
	@ConfigurationPropertiesSource
	public static class ConnectionProperties {

		/**
		 * Server: the address to listen on, host:port, an IP address of this host's RDMA
		 * netdev (e.g. 10.0.0.2:7471). Exactly one of listen and connect is set.
		 */
		private @Nullable String listen;

		/**
		 * Client: the server's address, host:port (e.g. 10.0.0.2:7471). Exactly one of
		 * listen and connect is set.
		 */
		private @Nullable String connect;

		/**
		 * How the queue pairs are connected: cm (rdma_cm, listen and connect are RDMA
		 * addresses) or out-of-band (endpoint records exchanged over TCP in
		 * ibv_rc_pingpong's format, listen and connect are the TCP addresses of the
		 * exchange, the RDMA device is that of the queues; the TCP connection stays open
		 * to tell when the peer goes away).
		 */
		private ConnectionExchange exchange = ConnectionExchange.CM;

		/**
		 * Client: the local IP address to connect from (rdma_resolve_addr's source),
		 * which picks the local RDMA device; omitted = chosen by routing.
		 */
		private @Nullable String source;

		/** Server: most peers connected at once; more are rejected. */
		private int maxPeers = 1;

		/**
		 * Bound of one connection attempt (address and route resolution, connect) or one
		 * accept.
		 */
		private Duration connectTimeout = Duration.ofSeconds(5);

		/** Client: back-off between connection attempts. */
		private final RetryProperties retry = new RetryProperties();

		/**
		 * Key of the device under rdma.devices the connection is on; omitted = that of
		 * its queues. The address must be on this device's netdev.
		 */
		private @Nullable String device;

		/**
		 * Key of the completion queue (under rdma.completion-queues) of the sends. The
		 * connections' router becomes its listener.
		 */
		private @Nullable String sendQueue;

		/**
		 * Key of the completion queue (under rdma.completion-queues) of the receives; may
		 * be the send queue.
		 */
		private @Nullable String receiveQueue;

		/**
		 * Sends in flight at most (max_send_wr), and the number of registered send
		 * buffers.
		 */
		private int sendDepth = 64;

		/** Receive queue depth (max_recv_wr). */
		private int receiveDepth = 64;

		/**
		 * Registered receive buffers kept posted, at most receive-depth; omitted =
		 * receive-depth.
		 */
		private @Nullable Integer receiveBuffers;

		/** Bytes of each send and receive buffer: the largest message. */
		private int messageSize = 4096;

		/**
		 * How long a send waits for a free send buffer when all are in flight before it
		 * throws SendQueueFullException; 0 = throw at once.
		 */
		private Duration sendTimeout = Duration.ofSeconds(1);

		/**
		 * Whether the rdma health indicator is DOWN while this connection is not
		 * established (a server: not listening).
		 */
		private boolean required = true;

		/**
		 * Size of the memory region each peer connection registers for the peer's
		 * one-sided RDMA WRITE and READ (remote write and read access) and advertises to
		 * it when connecting; 0 = none. At most 1GB.
		 */
		private DataSize remoteAccessSize = DataSize.ofBytes(0);

		/**
		 * rdma_cm connection parameters (struct rdma_conn_param); with out-of-band,
		 * retry-count and rnr-retry-count set the QP's, responder-resources and
		 * initiator-depth its max_dest_rd_atomic and max_rd_atomic (255: 1).
		 */
		private final CmProperties cm = new CmProperties();

		/** Options of the out-of-band exchange (exchange: out-of-band only). */
		private final OutOfBandProperties outOfBand = new OutOfBandProperties();

		public @Nullable String getListen() {
			return listen;
		}

		public void setListen(@Nullable String listen) {
			this.listen = listen;
		}

		public @Nullable String getConnect() {
			return connect;
		}

		public void setConnect(@Nullable String connect) {
			this.connect = connect;
		}

		public ConnectionExchange getExchange() {
			return exchange;
		}

		public void setExchange(ConnectionExchange exchange) {
			this.exchange = exchange;
		}

		public @Nullable String getSource() {
			return source;
		}

		public void setSource(@Nullable String source) {
			this.source = source;
		}

		public int getMaxPeers() {
			return maxPeers;
		}

		public void setMaxPeers(int maxPeers) {
			this.maxPeers = maxPeers;
		}

		public Duration getConnectTimeout() {
			return connectTimeout;
		}

		public void setConnectTimeout(Duration connectTimeout) {
			this.connectTimeout = connectTimeout;
		}

		public RetryProperties getRetry() {
			return retry;
		}

		public @Nullable String getDevice() {
			return device;
		}

		public void setDevice(@Nullable String device) {
			this.device = device;
		}

		public @Nullable String getSendQueue() {
			return sendQueue;
		}

		public void setSendQueue(@Nullable String sendQueue) {
			this.sendQueue = sendQueue;
		}

		public @Nullable String getReceiveQueue() {
			return receiveQueue;
		}

		public void setReceiveQueue(@Nullable String receiveQueue) {
			this.receiveQueue = receiveQueue;
		}

		public int getSendDepth() {
			return sendDepth;
		}

		public void setSendDepth(int sendDepth) {
			this.sendDepth = sendDepth;
		}

		public int getReceiveDepth() {
			return receiveDepth;
		}

		public void setReceiveDepth(int receiveDepth) {
			this.receiveDepth = receiveDepth;
		}

		public @Nullable Integer getReceiveBuffers() {
			return receiveBuffers;
		}

		public void setReceiveBuffers(@Nullable Integer receiveBuffers) {
			this.receiveBuffers = receiveBuffers;
		}

		public int getMessageSize() {
			return messageSize;
		}

		public void setMessageSize(int messageSize) {
			this.messageSize = messageSize;
		}

		public Duration getSendTimeout() {
			return sendTimeout;
		}

		public void setSendTimeout(Duration sendTimeout) {
			this.sendTimeout = sendTimeout;
		}

		public boolean isRequired() {
			return required;
		}

		public void setRequired(boolean required) {
			this.required = required;
		}

		public DataSize getRemoteAccessSize() {
			return remoteAccessSize;
		}

		public void setRemoteAccessSize(DataSize remoteAccessSize) {
			this.remoteAccessSize = remoteAccessSize;
		}

		public CmProperties getCm() {
			return cm;
		}

		public OutOfBandProperties getOutOfBand() {
			return outOfBand;
		}

	}

	/** How a connection's queue pairs are connected to their peers. */
	public enum ConnectionExchange {

		/**
		 * rdma_cm: listen and connect are addresses of the RDMA netdevs (the default).
		 */
		CM,
		/**
		 * Endpoint records exchanged over a TCP connection to listen or connect (the
		 * format of ibv_rc_pingpong), which stays open as the liveness channel; the RDMA
		 * device is that of the connection's queues.
		 */
		OUT_OF_BAND

	}

	/** Options of a connection's out-of-band exchange. */
	@ConfigurationPropertiesSource
	public static class OutOfBandProperties {

		/** Port number of the RDMA device (of the connection's queues), 1..255. */
		private int port = 1;

		/**
		 * Local GID index, 0..255; omitted = the first IPv4 RoCE v2 GID among the first
		 * 16 entries of the port's GID table (none on InfiniBand).
		 */
		private @Nullable Integer gidIndex;

		/**
		 * Path MTU of the connection's QP in bytes: 256, 512, 1024, 2048 or 4096, at most
		 * the port's active MTU; omitted = 1024 (ibv_rc_pingpong's default), or the
		 * port's active MTU when it is lower. The endpoint records do not carry it: set
		 * the same value on both ends.
		 */
		private @Nullable Integer pathMtu;

		public int getPort() {
			return port;
		}

		public @Nullable Integer getPathMtu() {
			return pathMtu;
		}

		public void setPathMtu(@Nullable Integer pathMtu) {
			this.pathMtu = pathMtu;
		}

		public void setPort(int port) {
			this.port = port;
		}

		public @Nullable Integer getGidIndex() {
			return gidIndex;
		}

		public void setGidIndex(@Nullable Integer gidIndex) {
			this.gidIndex = gidIndex;
		}

	}

	/** A client's back-off between connection attempts. */
	@ConfigurationPropertiesSource
	public static class RetryProperties {

		/** Wait after the first failed attempt. */
		private Duration initialInterval = Duration.ofMillis(100);

		/** Growth of the wait after each further failed attempt. */
		private double multiplier = 2.0;

		/** Longest wait between two attempts. */
		private Duration maxInterval = Duration.ofSeconds(5);

		/** Attempts before the client gives up; 0 = it never does. */
		private int maxAttempts = 0;

		public Duration getInitialInterval() {
			return initialInterval;
		}

		public void setInitialInterval(Duration initialInterval) {
			this.initialInterval = initialInterval;
		}

		public double getMultiplier() {
			return multiplier;
		}

		public void setMultiplier(double multiplier) {
			this.multiplier = multiplier;
		}

		public Duration getMaxInterval() {
			return maxInterval;
		}

		public void setMaxInterval(Duration maxInterval) {
			this.maxInterval = maxInterval;
		}

		public int getMaxAttempts() {
			return maxAttempts;
		}

		public void setMaxAttempts(int maxAttempts) {
			this.maxAttempts = maxAttempts;
		}

	}

	/**
	 * rdma_cm connection parameters; the defaults are those of the bindings
	 * (CmParameters.DEFAULTS).
	 */
	@ConfigurationPropertiesSource
	public static class CmProperties {

		/**
		 * RDMA reads in flight that this side accepts as responder (responder_resources),
		 * 0..255; 255 = the device's maximum.
		 */
		private int responderResources = 255;

		/**
		 * RDMA reads in flight that this side issues (initiator_depth), 0..255; 255 = the
		 * device's maximum.
		 */
		private int initiatorDepth = 255;

		/** Transport retries after a timeout (retry_count), 0..7. */
		private int retryCount = 7;

		/**
		 * Retries after a receiver-not-ready NAK (rnr_retry_count), 0..7; 7 = infinite.
		 */
		private int rnrRetryCount = 7;

		public int getResponderResources() {
			return responderResources;
		}

		public void setResponderResources(int responderResources) {
			this.responderResources = responderResources;
		}

		public int getInitiatorDepth() {
			return initiatorDepth;
		}

		public void setInitiatorDepth(int initiatorDepth) {
			this.initiatorDepth = initiatorDepth;
		}

		public int getRetryCount() {
			return retryCount;
		}

		public void setRetryCount(int retryCount) {
			this.retryCount = retryCount;
		}

		public int getRnrRetryCount() {
			return rnrRetryCount;
		}

		public void setRnrRetryCount(int rnrRetryCount) {
			this.rnrRetryCount = rnrRetryCount;
		}

	}

}
