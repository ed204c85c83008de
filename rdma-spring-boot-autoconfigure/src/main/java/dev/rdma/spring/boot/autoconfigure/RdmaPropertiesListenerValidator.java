package dev.rdma.spring.boot.autoconfigure;

import java.util.List;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.RdmaListenerEndpointValidator;
import dev.rdma.verbs.WcExFlag;

/**
 * Checks each listener against {@code rdma.completion-queues}: its queue must be
 * configured there, and provide (in its {@code wc-flags}; a legacy queue the standard
 * fields) every field the listener reads.
 */
class RdmaPropertiesListenerValidator implements RdmaListenerEndpointValidator {

	private final RdmaProperties properties;

	RdmaPropertiesListenerValidator(RdmaProperties properties) {
		this.properties = properties;
	}

	@Override
	public void validateQueue(String listener, String queue) {
		Map<String, CompletionQueueProperties> queues = properties.getCompletionQueues();
		if (queue == null || queue.isBlank() || !queues.containsKey(queue)) {
			throw new RdmaConfigurationException(listener, listener + " listens to queue '" + queue
					+ "', which is not configured under rdma.completion-queues (configured: " + queues.keySet() + ")",
					"Set queue to one of " + queues.keySet() + " or add rdma.completion-queues." + queue + ".");
		}
		properties.getConnections().forEach((key, connection) -> {
			if (queue.equals(connection.getSendQueue()) || queue.equals(connection.getReceiveQueue())) {
				throw new RdmaConfigurationException(listener,
						listener + " listens to queue '" + queue + "', which rdma.connections." + key
								+ " uses: its completions go to the connection (and its messages to an "
								+ "@RdmaMessageListener)",
						"Use @RdmaMessageListener(connection = \"" + key + "\"), or give the connection other queues.");
			}
		});
	}

	@Override
	public void validateFields(String listener, String queue, List<WcExFlag> fields) {
		CompletionQueueProperties config = properties.getCompletionQueues().get(queue);
		long provided = RdmaResources.providedWcFlags(config);
		// every missing field, not only the first: one restart fixes them all
		Set<WcExFlag> missing = new LinkedHashSet<>();
		for (WcExFlag field : fields) {
			if ((provided & field.bit()) == 0) {
				missing.add(field);
			}
		}
		if (missing.isEmpty()) {
			return;
		}
		String path = RdmaPropertiesValidator.QUEUES + queue + ".wc-flags";
		boolean one = missing.size() == 1;
		String names = one ? RdmaPropertiesValidator.yaml(missing.iterator().next())
				: RdmaPropertiesValidator.yaml(missing);
		String configured = config.getType() == QueueType.LEGACY
				? "legacy queues provide " + RdmaPropertiesValidator.yaml(standard())
				: path + "="
						+ (config.getWcFlags().isEmpty() ? "(not set: " + RdmaPropertiesValidator.yaml(standard()) + ")"
								: RdmaPropertiesValidator.yaml(config.getWcFlags()));
		throw new RdmaConfigurationException(listener,
				listener + " reads field" + (one ? " " : "s ") + names + ", but queue '" + queue + "' (type "
						+ RdmaPropertiesValidator.yaml(config.getType()) + ") does not provide " + (one ? "it" : "them")
						+ " (" + configured + ")",
				config.getType() == QueueType.LEGACY
						? "Make queue '" + queue + "' an extended queue (" + RdmaPropertiesValidator.QUEUES + queue
								+ ".type=extended) with " + names + " in " + path + "."
						: "Add " + names + " to " + path + ".");
	}

	private static List<WcExFlag> standard() {
		return java.util.Arrays.stream(WcExFlag.values()).filter(f -> (WcExFlag.STANDARD & f.bit()) != 0).toList();
	}

}
