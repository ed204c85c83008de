package dev.rdma.spring.boot.autoconfigure.health;

import java.util.LinkedHashMap;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.boot.autoconfigure.RdmaProperties;
import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.PortAttributes.PortState;

/**
 * Health of the RDMA resources: each device's port state ({@code ibv_query_port}) and
 * asynchronous events, each queue's size and CQ errors. DOWN when a port is not ACTIVE or
 * a queue reported IBV_EVENT_CQ_ERR.
 */
public class RdmaHealthIndicator extends AbstractHealthIndicator {

	private final RdmaResources resources;

	private final @Nullable RdmaAsyncEventMonitor monitor;

	public RdmaHealthIndicator(RdmaResources resources, @Nullable RdmaAsyncEventMonitor monitor) {
		super("RDMA health check failed");
		this.resources = resources;
		this.monitor = monitor;
	}

	@Override
	protected void doHealthCheck(Health.Builder builder) {
		boolean down = false;
		Map<String, Object> devices = new LinkedHashMap<>();
		for (Map.Entry<String, Context> entry : resources.contexts().entrySet()) {
			Context context = entry.getValue();
			RdmaProperties.DeviceProperties config = resources.properties().getDevices().get(entry.getKey());
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
			details.put("entries", queue.isClosed() ? 0 : queue.cqe());
			details.put("cqErrors", queue.asyncErrors());
			down |= queue.asyncErrors() > 0;
			queues.put(entry.getKey(), details);
		}
		(down ? builder.down() : builder.up()).withDetail("devices", devices).withDetail("completionQueues", queues);
	}

}
