package dev.rdma.spring.boot.autoconfigure;

import java.util.List;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;

import dev.rdma.spring.annotation.RdmaCompletionListenerAnnotationBeanPostProcessor;
import dev.rdma.spring.annotation.RdmaMessageListenerAnnotationBeanPostProcessor;

/**
 * Registers the {@link RdmaStatus} bean and, when any {@code rdma.*} property is set,
 * binds the properties strictly (unknown keys fail, {@link RdmaPropertiesBinding}) and
 * validates them ({@link RdmaPropertiesValidator}) whether or not a device is present.
 * When the RDMA auto-configuration is going to back off it also registers a listener
 * post-processor that only checks each {@code @RdmaCompletionListener} (queue, parameter,
 * fields, error handler) and one that only checks each {@code @RdmaMessageListener}
 * (parameter, connection), and starts nothing.
 */
class RdmaConfigurationCheckRegistrar extends RdmaRegistrarSupport {

	/** Bean name of the post-processor that checks listeners when RDMA backed off. */
	static final String LISTENER_CHECK_BEAN_NAME = "rdmaCompletionListenerCheck";

	/**
	 * Bean name of the post-processor that checks message listeners when RDMA backed off.
	 */
	static final String MESSAGE_LISTENER_CHECK_BEAN_NAME = "rdmaMessageListenerCheck";

	private static final Log logger = LogFactory.getLog(RdmaAutoConfiguration.class);

	@Override
	public void registerBeanDefinitions(AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
		Environment env = environment();
		ListableBeanFactory factory = (ListableBeanFactory) beanFactory();
		boolean configured = RdmaPropertiesBinding.configured(env);
		boolean required = Boolean.parseBoolean(env.getProperty("rdma.required", "false").trim());
		// the condition of RdmaAutoConfiguration asks the same question
		String problem = required ? null : OnRdmaAvailableCondition.problem();
		RootBeanDefinition status = new RootBeanDefinition(RdmaStatus.class,
				() -> new RdmaStatus(factory, problem, configured));
		registry.registerBeanDefinition(RdmaStatus.BEAN_NAME, status);
		if (!configured) {
			return;
		}
		RdmaProperties properties = RdmaPropertiesBinding.bindStrictly(env);
		RdmaPropertiesValidator.validate(properties,
				name -> registry.containsBeanDefinition(name) || RdmaBeanRegistrar.LATER_BEAN_NAMES.contains(name));
		if (problem != null) {
			RootBeanDefinition check = new RootBeanDefinition(RdmaCompletionListenerAnnotationBeanPostProcessor.class,
					() -> {
						RdmaCompletionListenerAnnotationBeanPostProcessor processor = new RdmaCompletionListenerAnnotationBeanPostProcessor();
						processor.setEndpointValidator(new RdmaPropertiesListenerValidator(properties));
						processor.setCheckOnly("RDMA backed off: " + problem);
						return processor;
					});
			check.setRole(BeanDefinition.ROLE_INFRASTRUCTURE);
			registry.registerBeanDefinition(LISTENER_CHECK_BEAN_NAME, check);
			RootBeanDefinition messageCheck = new RootBeanDefinition(
					RdmaMessageListenerAnnotationBeanPostProcessor.class, () -> {
						RdmaMessageListenerAnnotationBeanPostProcessor processor = new RdmaMessageListenerAnnotationBeanPostProcessor();
						processor.setCheckOnly("RDMA backed off: " + problem,
								List.copyOf(properties.getConnections().keySet()));
						return processor;
					});
			messageCheck.setRole(BeanDefinition.ROLE_INFRASTRUCTURE);
			registry.registerBeanDefinition(MESSAGE_LISTENER_CHECK_BEAN_NAME, messageCheck);
			logger.debug("rdma.* checked without RDMA (" + problem + "); listeners are checked, not started");
		}
	}

}
