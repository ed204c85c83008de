package dev.rdma.spring.boot.autoconfigure.listener;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;

import dev.rdma.spring.boot.autoconfigure.RdmaProperties;

/** The {@link RdmaCompletionListener} infrastructure: the annotation post-processor and the endpoint registry. */
@Configuration(proxyBeanMethods = false)
public class RdmaListenerConfiguration {

    @Bean(name = RdmaCompletionListenerAnnotationBeanPostProcessor.BEAN_NAME)
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static RdmaCompletionListenerAnnotationBeanPostProcessor rdmaCompletionListenerAnnotationBeanPostProcessor() {
        return new RdmaCompletionListenerAnnotationBeanPostProcessor();
    }

    @Bean(name = RdmaListenerEndpointRegistry.BEAN_NAME)
    RdmaListenerEndpointRegistry rdmaListenerEndpointRegistry(RdmaProperties properties,
            ObjectProvider<PollerMetrics.Factory> metrics) {
        return new RdmaListenerEndpointRegistry(properties, metrics);
    }
}
