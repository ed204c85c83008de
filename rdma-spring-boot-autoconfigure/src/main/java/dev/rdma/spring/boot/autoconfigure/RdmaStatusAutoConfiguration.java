package dev.rdma.spring.boot.autoconfigure;

import org.springframework.boot.LazyInitializationExcludeFilter;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

import dev.rdma.verbs.Context;

/**
 * Active with or without RDMA (ordered before {@link RdmaAutoConfiguration}, which backs
 * off without a device): provides the {@link RdmaStatus} bean and, whenever an
 * {@code rdma.*} property is set, checks the configuration, device or not: unknown keys,
 * every property and reference ({@link RdmaPropertiesValidator}), and, when RDMA backed
 * off, each {@code @RdmaCompletionListener} against the configured queues. A CI machine
 * without RDMA thus catches every mistake that needs no device. See
 * {@link RdmaConfigurationCheckRegistrar}. Beans with listener methods stay eager under
 * lazy initialization ({@link RdmaListenerLazyInitializationExcludeFilter}), so that
 * their listeners run, and are checked, at startup.
 */
@AutoConfiguration(before = RdmaAutoConfiguration.class)
@ConditionalOnClass(Context.class)
@Import(RdmaConfigurationCheckRegistrar.class)
public class RdmaStatusAutoConfiguration {

	@Bean
	static LazyInitializationExcludeFilter rdmaListenerLazyInitializationExcludeFilter() {
		return new RdmaListenerLazyInitializationExcludeFilter();
	}

}
