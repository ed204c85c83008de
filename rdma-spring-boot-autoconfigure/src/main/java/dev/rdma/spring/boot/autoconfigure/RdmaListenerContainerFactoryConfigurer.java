package dev.rdma.spring.boot.autoconfigure;

import java.util.List;

import dev.rdma.spring.config.DefaultRdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerContainerCustomizer;
import dev.rdma.spring.listener.PollerMetrics;

/**
 * Fills a {@link DefaultRdmaListenerContainerFactory} the way the auto-configuration
 * does: the poller groups from {@code rdma.pollers.*}, the poller settings of each queue
 * from {@code rdma.completion-queues.<queue>.polling.*} and {@code .ack-batch} and its
 * group from {@code .poller}, the pollers' metrics, and the
 * {@link RdmaListenerContainerCustomizer} beans in order. An application that defines its
 * own {@code rdmaListenerContainerFactory} can call it to start from the same state.
 */
public class RdmaListenerContainerFactoryConfigurer {

	private final RdmaProperties properties;

	private final PollerMetrics.Factory metrics;

	private final List<RdmaListenerContainerCustomizer> customizers;

	public RdmaListenerContainerFactoryConfigurer(RdmaProperties properties, PollerMetrics.Factory metrics,
			List<RdmaListenerContainerCustomizer> customizers) {
		this.properties = properties;
		this.metrics = metrics;
		this.customizers = List.copyOf(customizers);
	}

	/**
	 * Configures {@code factory} from the properties, the metrics and the customizers.
	 */
	public void configure(DefaultRdmaListenerContainerFactory factory) {
		properties.getPollers().forEach((name, group) -> factory.setPollerGroupSettings(name, group.toSettings()));
		properties.getCompletionQueues().forEach((name, queue) -> {
			factory.setPollerSettings(name, queue.toPollerSettings());
			factory.setPollerGroup(name, RdmaPropertiesValidator.effectivePoller(queue));
		});
		factory.setMetrics(metrics);
		factory.setContainerCustomizers(customizers);
	}

}
