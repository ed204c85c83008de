package dev.rdma.spring.annotation;

import java.lang.reflect.Method;

import org.springframework.aop.support.AopUtils;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.listener.ListenerInvoker;

/**
 * Binds a listener method of a bean, for both listener post-processors: a method that
 * cannot be invoked on the bean as created (a JDK proxy whose interfaces lack it, a
 * private method behind a class-based proxy, an inaccessible method) fails with a
 * {@link RdmaConfigurationException} naming the listener, as every other listener mistake
 * does, so that the failure analyzer reports it.
 */
final class ListenerMethods {

	private ListenerMethods() {
	}

	static ListenerInvoker invoker(String id, Object bean, Method method) {
		try {
			return ListenerInvoker.bind(bean, AopUtils.selectInvocableMethod(method, bean.getClass()));
		}
		catch (IllegalStateException ex) {
			throw new RdmaConfigurationException(id,
					id + " cannot be invoked on bean " + bean.getClass().getName() + ": " + ex.getMessage(),
					"Declare the method public on an interface the proxy implements, or proxy the class "
							+ "(proxyTargetClass = true) and make the method non-private.",
					ex);
		}
	}

}
