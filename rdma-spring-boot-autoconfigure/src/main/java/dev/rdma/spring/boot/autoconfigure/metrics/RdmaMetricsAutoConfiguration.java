package dev.rdma.spring.boot.autoconfigure.metrics;

import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.spring.listener.PollerMetrics;

/**
 * Micrometer meters of the pollers ({@link RdmaMicrometerMetrics}) when Micrometer is on
 * the class path and the RDMA auto-configuration created its resources. The registry is
 * looked up when the bean is created: with no unique {@link MeterRegistry} the pollers
 * get {@link PollerMetrics.Factory#NONE} and do not even read the clock.
 */
@AutoConfiguration(after = RdmaAutoConfiguration.class)
@ConditionalOnClass(MeterRegistry.class)
@ConditionalOnBean(RdmaResources.class)
public class RdmaMetricsAutoConfiguration {

	/** Bean name of the pollers' metrics factory. */
	public static final String POLLER_METRICS_BEAN_NAME = "rdmaPollerMetrics";

	/** Bean name of the connections' meters. */
	public static final String CONNECTION_METRICS_BEAN_NAME = "rdmaConnectionMetrics";

	@Bean(name = CONNECTION_METRICS_BEAN_NAME)
	@ConditionalOnBean(RdmaConnectionRegistry.class)
	@ConditionalOnMissingBean(name = CONNECTION_METRICS_BEAN_NAME)
	RdmaConnectionMetrics rdmaConnectionMetrics(ObjectProvider<MeterRegistry> registry,
			RdmaConnectionRegistry connections) {
		return new RdmaConnectionMetrics(registry, connections);
	}

	/** Bean name of the locked-memory gauges. */
	public static final String MEMORY_METRICS_BEAN_NAME = "rdmaMemoryMetrics";

	@Bean(name = MEMORY_METRICS_BEAN_NAME)
	@ConditionalOnMissingBean(name = MEMORY_METRICS_BEAN_NAME)
	RdmaMemoryMetrics rdmaMemoryMetrics(ObjectProvider<MeterRegistry> registry, RdmaResources resources) {
		return new RdmaMemoryMetrics(registry, resources.pinnedMemory());
	}

	@Bean(name = POLLER_METRICS_BEAN_NAME)
	@ConditionalOnMissingBean(PollerMetrics.Factory.class)
	PollerMetrics.Factory rdmaPollerMetrics(ObjectProvider<MeterRegistry> registry, RdmaResources resources) {
		MeterRegistry meterRegistry = registry.getIfUnique();
		return meterRegistry == null ? PollerMetrics.Factory.NONE : new RdmaMicrometerMetrics(meterRegistry, resources);
	}

}
