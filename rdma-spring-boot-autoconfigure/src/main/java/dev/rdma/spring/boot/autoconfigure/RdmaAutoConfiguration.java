package dev.rdma.spring.boot.autoconfigure;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Import;

import dev.rdma.verbs.Context;

/**
 * Auto-configuration of RDMA devices, completion channels and completion queues
 * ({@code rdma.*}, see {@link RdmaProperties}) and of {@code @RdmaCompletionListener}
 * dispatch. Backs off when libibverbs or an RDMA device is missing, unless
 * {@code rdma.required=true}. The beans are registered by {@link RdmaBeanRegistrar} and
 * created by {@link RdmaResources}. Metrics and health are auto-configurations of their
 * own, ordered after this one ({@code RdmaMetricsAutoConfiguration},
 * {@code RdmaHealthAutoConfiguration}); this class does not know them.
 */
@AutoConfiguration
@ConditionalOnClass(Context.class)
@Conditional(OnRdmaAvailableCondition.class)
@EnableConfigurationProperties(RdmaProperties.class)
@Import({ RdmaBeanRegistrar.class, RdmaAnnotationDrivenConfiguration.class })
public class RdmaAutoConfiguration {

}
