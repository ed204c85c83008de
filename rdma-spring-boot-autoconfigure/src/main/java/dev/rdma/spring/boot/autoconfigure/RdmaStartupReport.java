package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.SmartLifecycle;

import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LockedMemory;

/**
 * Logs, once the pollers have started, one INFO line per device, channel and completion
 * queue: what was created and which thread works for it. A queue's line says its type,
 * size, polling mode and what that costs (busy: a core, also when idle), its listener and
 * poller thread, or that no listener polls it. Starts right after the
 * {@link RdmaListenerEndpointRegistry} (whose phase is one lower).
 */
class RdmaStartupReport implements SmartLifecycle {

	private static final Log logger = LogFactory.getLog(RdmaStartupReport.class);

	private final RdmaResources resources;

	private final ObjectProvider<RdmaListenerEndpointRegistry> registry;

	private volatile boolean running;

	RdmaStartupReport(RdmaResources resources, ObjectProvider<RdmaListenerEndpointRegistry> registry) {
		this.resources = resources;
		this.registry = registry;
	}

	@Override
	public void start() {
		running = true;
		if (logger.isInfoEnabled()) {
			lines().forEach(logger::info);
		}
		if (logger.isWarnEnabled()) {
			PollerPlacement.warnings(resources.properties(), deviceNodes()).forEach(logger::warn);
		}
	}

	private Map<String, PollerPlacement.DeviceNode> deviceNodes() {
		Map<String, PollerPlacement.DeviceNode> nodes = new LinkedHashMap<>();
		resources.contexts()
			.forEach((key, context) -> nodes.put(key, PollerPlacement.deviceNode(context.deviceName())));
		return nodes;
	}

	/** The lines of the report, in the order devices, channels, queues. */
	List<String> lines() {
		RdmaProperties properties = resources.properties();
		RdmaListenerEndpointRegistry endpoints = registry.getIfAvailable();
		List<String> lines = new ArrayList<>();
		resources.contexts()
			.forEach((key, context) -> lines
				.add(deviceLine(key, context.deviceName(), properties.getDevices().get(key).getPort())));
		resources.channels().forEach((key, channel) -> {
			List<String> served = new ArrayList<>();
			properties.getCompletionQueues().forEach((queue, config) -> {
				if (key.equals(config.getChannel())) {
					served.add(queue);
				}
			});
			String device = RdmaPropertiesValidator.resolveDevice(properties, RdmaPropertiesValidator.CHANNELS + key,
					properties.getChannels().get(key).getDevice());
			lines.add(channelLine(key, device, served));
		});
		deviceNodes()
			.forEach((key, node) -> lines.add("RDMA device '" + key + "' (" + node.device() + "): " + node.describe()));
		for (Map.Entry<String, CompletionQueue> entry : resources.queues().entrySet()) {
			String key = entry.getKey();
			CompletionQueue queue = entry.getValue();
			CompletionQueueListenerContainer container = endpoints == null ? null : endpoints.getListenerContainer(key);
			Context context = queue.context();
			lines.add(queueLine(key, properties.getCompletionQueues().get(key), queue.isClosed() ? -1 : queue.cqe(),
					resources.deviceKeyOfQueue(key) + " (" + context.deviceName() + ")", container));
		}
		properties.getPollers().forEach((group, poller) -> {
			if (poller.getCpus() != null) {
				lines.add("RDMA poller group '" + group + "': threads pinned to CPUs " + poller.getCpus());
			}
		});
		lines.addAll(resources.pinnedMemory().lines(LockedMemory.current()));
		return lines;
	}

	static String deviceLine(String key, String deviceName, int port) {
		return "RDMA device '" + key + "': " + deviceName + ", port " + port + "; asynchronous events read by thread "
				+ "rdma-async-" + deviceName;
	}

	static String channelLine(String key, String device, List<String> queues) {
		return "RDMA completion channel '" + key + "' on device '" + device + "': events of "
				+ (queues.isEmpty() ? "no queue" : "queue(s) " + queues);
	}

	/**
	 * @param cqe the actual size, -1 when unknown
	 * @param container the queue's listener container, null when it has no listener
	 */
	static String queueLine(String key, CompletionQueueProperties config, int cqe, String device,
			@Nullable CompletionQueueListenerContainer container) {
		StringBuilder line = new StringBuilder("RDMA completion queue '").append(key)
			.append("': type ")
			.append(RdmaPropertiesValidator.yaml(config.getType()))
			.append(", ")
			.append(cqe >= 0 ? cqe : config.getEntries())
			.append(" entries");
		if (cqe >= 0 && cqe != config.getEntries()) {
			line.append(" (asked ").append(config.getEntries()).append(')');
		}
		line.append(", device ").append(device);
		line.append(", channel ").append(config.getChannel() == null ? "none" : "'" + config.getChannel() + "'");
		if (container == null) {
			return line.append("; no listener: not polled by the starter").toString();
		}
		PollingMode mode = container.mode();
		line.append("; polling ").append(RdmaPropertiesValidator.yaml(mode)).append(" (").append(cost(container));
		line.append("), batch ").append(container.getSettings().batchSize());
		line.append("; listener ").append(Objects.requireNonNullElse(container.getListenerId(), "?"));
		Thread thread = container.thread();
		PollerGroup group = container.getPollerGroup();
		line.append(" on thread ")
			.append(thread != null ? thread.getName()
					: (group != null ? "of poller group '" + group.name() + "'" : "rdma-poller-" + key)
							+ " (not started)");
		return line.toString();
	}

	/** What the polling mode costs, in words. */
	private static String cost(CompletionQueueListenerContainer container) {
		PollerGroup group = container.getPollerGroup();
		// a queue of a group spins as long as its group does
		Duration spin = (group != null) ? group.settings().spin() : container.getSettings().spin();
		return switch (container.mode()) {
			case BUSY -> "spins: one core busy, also when idle";
			case EVENT -> "waits on the channel when idle";
			case ADAPTIVE -> "spins " + spin.toNanos() / 1000 + "us after a completion, then waits on the channel";
			case BACKOFF ->
				"sleeps up to " + container.getSettings().maxSleep().toNanos() / 1000 + "us between polls when idle";
		};
	}

	@Override
	public void stop() {
		running = false;
	}

	@Override
	public boolean isRunning() {
		return running;
	}

	/** Right after the listener registry, so the poller threads exist. */
	@Override
	public int getPhase() {
		return new RdmaListenerEndpointRegistry().getPhase() + 1;
	}

}
