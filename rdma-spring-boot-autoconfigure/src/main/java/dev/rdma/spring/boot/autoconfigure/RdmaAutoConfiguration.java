package dev.rdma.spring.boot.autoconfigure;

import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.boot.autoconfigure.listener.PollerMetrics;
import dev.rdma.spring.boot.autoconfigure.listener.RdmaListenerConfiguration;
import dev.rdma.spring.boot.autoconfigure.metrics.RdmaMicrometerMetrics;
import dev.rdma.verbs.Context;

/**
 * Auto-configuration of RDMA devices, completion channels and completion queues ({@code rdma.*}, see
 * {@link RdmaProperties}) and of {@code @RdmaCompletionListener} dispatch. Backs off when libibverbs or an RDMA device
 * is missing, unless {@code rdma.required=true}. The beans are registered by {@link RdmaBeanRegistrar} and created by
 * {@link RdmaResources}.
 */
@AutoConfiguration
@ConditionalOnClass(Context.class)
@Conditional(OnRdmaAvailableCondition.class)
@EnableConfigurationProperties(RdmaProperties.class)
@Import({ RdmaBeanRegistrar.class, RdmaListenerConfiguration.class })
public class RdmaAutoConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(MeterRegistry.class)
    static class RdmaMetricsConfiguration {

        @Bean
        @ConditionalOnMissingBean(PollerMetrics.Factory.class)
        PollerMetrics.Factory rdmaPollerMetrics(ObjectProvider<MeterRegistry> registry, RdmaResources resources) {
            MeterRegistry meterRegistry = registry.getIfUnique();
            return meterRegistry == null ? PollerMetrics.Factory.NONE
                    : new RdmaMicrometerMetrics(meterRegistry, resources);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    @ConditionalOnEnabledHealthIndicator("rdma")
    static class RdmaHealthConfiguration {

        @Bean
        @ConditionalOnMissingBean(name = "rdmaHealthIndicator")
        RdmaHealthIndicator rdmaHealthIndicator(RdmaResources resources,
                ObjectProvider<RdmaAsyncEventMonitor> monitor) {
            return new RdmaHealthIndicator(resources, monitor.getIfAvailable());
        }
    }
}
