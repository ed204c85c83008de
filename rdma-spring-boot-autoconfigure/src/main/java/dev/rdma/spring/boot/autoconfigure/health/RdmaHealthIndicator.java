package dev.rdma.spring.boot.autoconfigure.health;

import java.util.LinkedHashMap;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.boot.autoconfigure.DeviceProperties;
import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.spring.connection.support.ConfiguredConnection;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.PortAttributes.PortState;

/**
 * Health of the RDMA resources: each device's port state ({@code ibv_query_port}) and
 * asynchronous events, each queue's size and CQ errors, each connection's state. DOWN
 * when a port is not ACTIVE, a queue reported IBV_EVENT_CQ_ERR, or a required connection
 * is not up (a client not established, a server not listening).
 */
public class RdmaHealthIndicator extends AbstractHealthIndicator {

	private final RdmaResources resources;

	private final @Nullable RdmaAsyncEventMonitor monitor;

	private final @Nullable RdmaConnectionRegistry connections;

	public RdmaHealthIndicator(RdmaResources resources, @Nullable RdmaAsyncEventMonitor monitor) {
		this(resources, monitor, null);
	}

	public RdmaHealthIndicator(RdmaResources resources, @Nullable RdmaAsyncEventMonitor monitor,
			@Nullable RdmaConnectionRegistry connections) {
		super("RDMA health check failed");
		this.resources = resources;
		this.monitor = monitor;
		this.connections = connections;
	}

	@Override
	protected void doHealthCheck(Health.Builder builder) {
		boolean down = false;
		Map<String, Object> devices = new LinkedHashMap<>();
		for (Map.Entry<String, Context> entry : resources.contexts().entrySet()) {
			Context context = entry.getValue();
			DeviceProperties config = resources.properties().getDevices().get(entry.getKey());
			int port = config == null ? 1 : config.getPort();
			Map<String, Object> details = new LinkedHashMap<>();
			details.put("device", context.deviceName());
			details.put("port", port);
			PortState state;
			try {
				state = context.queryPort(port).state();
			}
			catch (RuntimeException ex) {
				state = PortState.UNKNOWN;
				details.put("error", ex.getMessage());
			}
			details.put("state", state.name());
			down |= state != PortState.ACTIVE;
			RdmaAsyncEventMonitor.DeviceEvents events = monitor == null ? null : monitor.events(entry.getKey());
			if (events != null) {
				details.put("asyncEvents", events.total());
				details.put("cqErrors", events.cqErrors());
				details.put("portErrors", events.portErrors());
				if (events.lastEvent() != null) {
					details.put("lastEvent", events.lastEvent());
				}
			}
			devices.put(entry.getKey(), details);
		}
		Map<String, Object> queues = new LinkedHashMap<>();
		for (Map.Entry<String, CompletionQueue> entry : resources.queues().entrySet()) {
			CompletionQueue queue = entry.getValue();
			Map<String, Object> details = new LinkedHashMap<>();
			details.put("device", queue.context().deviceName());
			details.put("entries", entries(queue));
			details.put("cqErrors", queue.asyncErrors());
			down |= queue.asyncErrors() > 0;
			queues.put(entry.getKey(), details);
		}
		Map<String, Object> connectionDetails = new LinkedHashMap<>();
		RdmaConnectionRegistry registry = connections;
		if (registry != null) {
			for (ConfiguredConnection connection : registry.connections()) {
				Map<String, Object> details = new LinkedHashMap<>();
				details.put("state", connection.state().name());
				details.put("role", connection.isServer() ? "server" : "client");
				details.put("address", String.valueOf(connection.settings().address()));
				details.put("required", connection.required());
				String device = connection.deviceName();
				if (device != null) {
					details.put("device", device);
				}
				details.put("peers", connection.peers().size());
				details.put("reconnects", connection.counters().reconnects());
				down |= connection.required() && !connection.isUp();
				connectionDetails.put(connection.name(), details);
			}
		}
		(down ? builder.down() : builder.up()).withDetail("devices", devices).withDetail("completionQueues", queues);
		if (!connectionDetails.isEmpty()) {
			builder.withDetail("connections", connectionDetails);
		}
	}

	/** The queue's cqe, 0 once closed (also when it closes while this reads it). */
	private static int entries(CompletionQueue queue) {
		try {
			return queue.isClosed() ? 0 : queue.cqe();
		}
		catch (IllegalStateException closed) {
			return 0;
		}
	}

}
