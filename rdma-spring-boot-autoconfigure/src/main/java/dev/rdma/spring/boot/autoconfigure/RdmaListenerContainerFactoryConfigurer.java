package dev.rdma.spring.boot.autoconfigure;

import java.util.List;

import dev.rdma.spring.config.DefaultRdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerContainerCustomizer;
import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollerMetrics;
import dev.rdma.spring.listener.PollerSettings;

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
		properties.getPollers().forEach((name, group) -> factory.setPollerGroupSettings(name, groupSettings(group)));
		properties.getCompletionQueues().forEach((name, queue) -> {
			factory.setPollerSettings(name, settings(queue));
			factory.setPollerGroup(name, RdmaPropertiesValidator.effectivePoller(queue));
		});
		factory.setMetrics(metrics);
		factory.setContainerCustomizers(customizers);
	}

	/** The settings of one configured poller group. */
	static PollerGroupSettings groupSettings(PollerProperties group) {
		PollerGroupSettings settings = new PollerGroupSettings();
		settings.setThreads(group.getThreads());
		settings.setMode(group.getMode());
		settings.setSpin(group.getSpin());
		settings.setBatchBudget(group.getBatchBudget());
		return settings;
	}

	/** The poller settings of one configured queue. */
	static PollerSettings settings(CompletionQueueProperties queue) {
		PollerSettings settings = new PollerSettings();
		settings.setMode(RdmaPropertiesValidator.effectiveMode(queue));
		settings.setBatchSize(queue.getPolling().getBatchSize());
		settings.setSpin(queue.getPolling().getSpin());
		settings.setMaxSleep(queue.getPolling().getMaxSleep());
		settings.setAckBatch(queue.getAckBatch());
		return settings;
	}

}
