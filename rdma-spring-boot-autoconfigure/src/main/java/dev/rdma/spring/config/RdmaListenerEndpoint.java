package dev.rdma.spring.config;

import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.stream.Collectors;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.listener.ListenerInvoker;

/**
 * A discovered {@code @RdmaCompletionListener} method, validated and bound: what a
 * {@link RdmaListenerContainerFactory} makes a container for.
 *
 * @param id how messages name the listener:
 * {@code @RdmaCompletionListener X.onRx(WorkCompletion) of bean 'x'}
 * @param beanName the bean's name
 * @param method the annotated method
 * @param queue the queue key (the queue bean's name)
 * @param batch whether it takes a {@code CompletionBatch}
 * @param errorHandler the name of the error handler bean, or null
 * @param invoker the bound method
 */
public record RdmaListenerEndpoint(String id, String beanName, Method method, String queue, boolean batch,
		@Nullable String errorHandler, ListenerInvoker invoker) {

	/** How messages name the listener {@code method} of bean {@code beanName}. */
	public static String describe(String beanName, Method method) {
		return "@RdmaCompletionListener " + method.getDeclaringClass().getSimpleName() + "." + method.getName() + "("
				+ Arrays.stream(method.getParameterTypes()).map(Class::getSimpleName).collect(Collectors.joining(", "))
				+ ") of bean '" + beanName + "'";
	}
}
