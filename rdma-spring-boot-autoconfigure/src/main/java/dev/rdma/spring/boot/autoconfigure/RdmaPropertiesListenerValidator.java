package dev.rdma.spring.boot.autoconfigure;

import java.util.List;
import java.util.Locale;
import java.util.Map;

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
		Map<String, RdmaProperties.CompletionQueueProperties> queues = properties.getCompletionQueues();
		if (queue == null || queue.isBlank() || !queues.containsKey(queue)) {
			throw new RdmaConfigurationException(listener, listener + " listens to queue '" + queue
					+ "', which is not configured under rdma.completion-queues (configured: " + queues.keySet() + ")",
					"Set queue to one of " + queues.keySet() + " or add rdma.completion-queues." + queue + ".");
		}
	}

	@Override
	public void validateFields(String listener, String queue, List<WcExFlag> fields) {
		RdmaProperties.CompletionQueueProperties config = properties.getCompletionQueues().get(queue);
		long provided = RdmaResources.providedWcFlags(config);
		for (WcExFlag field : fields) {
			if ((provided & field.bit()) == 0) {
				String path = RdmaPropertiesValidator.QUEUES + queue + ".wc-flags";
				String name = field.name().toLowerCase(Locale.ROOT).replace('_', '-');
				throw new RdmaConfigurationException(listener,
						listener + " reads field " + name + ", but queue '" + queue + "' (type "
								+ config.getType().name().toLowerCase(Locale.ROOT) + ") does not provide it (" + path
								+ "=" + config.getWcFlags() + ")",
						config.getType() == RdmaProperties.QueueType.LEGACY
								? "Make queue '" + queue + "' an extended queue with that field in " + path + "."
								: "Add " + name + " to " + path + ".");
			}
		}
	}

}
