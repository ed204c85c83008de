package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

import org.springframework.boot.context.properties.ConfigurationProperties;

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
	 * spin, batch-budget, cpus.
	 */
	private Map<String, PollerProperties> pollers = new LinkedHashMap<>();

	/**
	 * Connections to other applications over RDMA (rdma_cm, or an out-of-band TCP
	 * exchange), by bean name (the key, e.g. orders). Each becomes a
	 * dev.rdma.spring.connection.RdmaConnection bean; a server sets listen, a client
	 * connect. Properties of each connection: listen, connect, exchange, source,
	 * max-peers, allowed-peers, connect-timeout, retry.initial-interval,
	 * retry.multiplier, retry.max-interval, retry.max-attempts, device, send-queue,
	 * receive-queue, send-depth, receive-depth, receive-buffers, message-size,
	 * max-inline-data, signal-interval, send-timeout, required, remote-access-size,
	 * cm.responder-resources, cm.initiator-depth, cm.retry-count, cm.rnr-retry-count,
	 * out-of-band.port, out-of-band.gid-index, out-of-band.path-mtu,
	 * out-of-band.liveness, shared-receive-queue.enabled, shared-receive-queue.depth,
	 * shared-receive-queue.limit.
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

}
