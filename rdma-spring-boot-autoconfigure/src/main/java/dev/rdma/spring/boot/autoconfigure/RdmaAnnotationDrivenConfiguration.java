package dev.rdma.spring.boot.autoconfigure;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;

import dev.rdma.spring.annotation.RdmaCompletionListenerAnnotationBeanPostProcessor;
import dev.rdma.spring.annotation.RdmaMessageListenerAnnotationBeanPostProcessor;
import dev.rdma.spring.config.DefaultRdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerContainerCustomizer;
import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.config.RdmaListenerEndpointValidator;
import dev.rdma.spring.listener.PollerMetrics;

/**
 * The {@code @RdmaCompletionListener} infrastructure: the annotation post-processor, the
 * endpoint registry, the container factory
 * ({@value RdmaListenerContainerFactory#DEFAULT_BEAN_NAME}, filled from the properties by
 * {@link RdmaListenerContainerFactoryConfigurer} and changed by every
 * {@link RdmaListenerContainerCustomizer} bean), and the check of each listener against
 * {@code rdma.completion-queues}.
 */
@Configuration(proxyBeanMethods = false)
class RdmaAnnotationDrivenConfiguration {

	@Bean(name = RdmaCompletionListenerAnnotationBeanPostProcessor.BEAN_NAME)
	@Role(BeanDefinition.ROLE_INFRASTRUCTURE)
	static RdmaCompletionListenerAnnotationBeanPostProcessor rdmaCompletionListenerAnnotationBeanPostProcessor() {
		return new RdmaCompletionListenerAnnotationBeanPostProcessor();
	}

	@Bean(name = RdmaMessageListenerAnnotationBeanPostProcessor.BEAN_NAME)
	@Role(BeanDefinition.ROLE_INFRASTRUCTURE)
	static RdmaMessageListenerAnnotationBeanPostProcessor rdmaMessageListenerAnnotationBeanPostProcessor() {
		return new RdmaMessageListenerAnnotationBeanPostProcessor();
	}

	@Bean
	@ConditionalOnMissingBean(RdmaListenerEndpointValidator.class)
	RdmaListenerEndpointValidator rdmaListenerEndpointValidator(RdmaProperties properties) {
		return new RdmaPropertiesListenerValidator(properties);
	}

	@Bean
	@ConditionalOnMissingBean
	RdmaListenerContainerFactoryConfigurer rdmaListenerContainerFactoryConfigurer(RdmaProperties properties,
			ObjectProvider<PollerMetrics.Factory> metrics,
			ObjectProvider<RdmaListenerContainerCustomizer> customizers) {
		return new RdmaListenerContainerFactoryConfigurer(properties,
				metrics.getIfAvailable(() -> PollerMetrics.Factory.NONE), customizers.orderedStream().toList());
	}

	@Bean(name = RdmaListenerContainerFactory.DEFAULT_BEAN_NAME)
	@ConditionalOnMissingBean(name = RdmaListenerContainerFactory.DEFAULT_BEAN_NAME)
	DefaultRdmaListenerContainerFactory rdmaListenerContainerFactory(
			RdmaListenerContainerFactoryConfigurer configurer) {
		DefaultRdmaListenerContainerFactory factory = new DefaultRdmaListenerContainerFactory();
		configurer.configure(factory);
		return factory;
	}

	@Bean(name = RdmaListenerEndpointRegistry.BEAN_NAME)
	RdmaListenerEndpointRegistry rdmaListenerEndpointRegistry(RdmaProperties properties) {
		RdmaListenerEndpointRegistry registry = new RdmaListenerEndpointRegistry();
		registry.setShutdownTimeout(properties.getShutdownTimeout());
		return registry;
	}

}
