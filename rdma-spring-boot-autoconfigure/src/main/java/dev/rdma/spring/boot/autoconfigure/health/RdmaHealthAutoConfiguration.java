package dev.rdma.spring.boot.autoconfigure.health;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;

/**
 * The {@code rdma} health indicator ({@link RdmaHealthIndicator}), when Spring Boot's
 * health support is on the class path, the indicator is enabled
 * ({@code management.health.rdma.enabled}) and the RDMA auto-configuration created its
 * resources.
 */
@AutoConfiguration(after = RdmaAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnBean(RdmaResources.class)
@ConditionalOnEnabledHealthIndicator("rdma")
public class RdmaHealthAutoConfiguration {

	/**
	 * Bean name of the health indicator (the indicator is named {@code rdma} after it).
	 */
	public static final String HEALTH_INDICATOR_BEAN_NAME = "rdmaHealthIndicator";

	@Bean(name = HEALTH_INDICATOR_BEAN_NAME)
	@ConditionalOnMissingBean(name = HEALTH_INDICATOR_BEAN_NAME)
	RdmaHealthIndicator rdmaHealthIndicator(RdmaResources resources, ObjectProvider<RdmaAsyncEventMonitor> monitor,
			ObjectProvider<RdmaConnectionRegistry> connections) {
		return new RdmaHealthIndicator(resources, monitor.getIfAvailable(), connections.getIfAvailable());
	}

}
