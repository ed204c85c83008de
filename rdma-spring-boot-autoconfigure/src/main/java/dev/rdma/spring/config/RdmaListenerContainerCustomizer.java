package dev.rdma.spring.config;

import dev.rdma.spring.listener.CompletionQueueListenerContainer;

/**
 * Changes a listener container after its factory set it up and before it starts: its
 * {@link CompletionQueueListenerContainer#setSettings poller settings} (mode, batch size,
 * spin, ack batch, max sleep), its error handler or its metrics. The starter's
 * auto-configuration hands every bean of this type, in {@code @Order}, to its
 * {@link DefaultRdmaListenerContainerFactory}, so an application can change a poller
 * without replacing the auto-configuration:
 *
 * <pre>
 * &#64;Bean
 * RdmaListenerContainerCustomizer largerRxBatches() {
 *     return container -&gt; {
 *         if (container.queue().equals("rx")) {
 *             container.setSettings(container.getSettings().withBatchSize(128));
 *         }
 *     };
 * }
 * </pre>
 */
@FunctionalInterface
public interface RdmaListenerContainerCustomizer {

	void customize(CompletionQueueListenerContainer container);

}
