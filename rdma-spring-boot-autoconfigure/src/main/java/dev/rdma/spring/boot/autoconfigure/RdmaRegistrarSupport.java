package dev.rdma.spring.boot.autoconfigure;

import java.util.Objects;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.context.EnvironmentAware;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.env.Environment;

/**
 * What the starter's registrars ({@link RdmaBeanRegistrar}, which defines the RDMA beans,
 * and {@link RdmaConfigurationCheckRegistrar}, which checks the configuration when RDMA
 * backed off) share: the environment and bean factory Spring hands them before it asks
 * for their bean definitions.
 */
abstract class RdmaRegistrarSupport implements ImportBeanDefinitionRegistrar, EnvironmentAware, BeanFactoryAware {

	private @Nullable Environment environment;

	private @Nullable BeanFactory beanFactory;

	@Override
	public void setEnvironment(Environment environment) {
		this.environment = environment;
	}

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = beanFactory;
	}

	/** The environment, set before {@code registerBeanDefinitions}. */
	Environment environment() {
		return Objects.requireNonNull(this.environment, "environment");
	}

	/** The bean factory, set before {@code registerBeanDefinitions}. */
	BeanFactory beanFactory() {
		return Objects.requireNonNull(this.beanFactory, "beanFactory");
	}

}
