package dev.rdma.spring.annotation;

import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.jspecify.annotations.Nullable;

import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationUtils;

/**
 * What the two listener post-processors share
 * ({@link RdmaCompletionListenerAnnotationBeanPostProcessor},
 * {@link RdmaMessageListenerAnnotationBeanPostProcessor}): finding the methods annotated
 * with their annotation on every bean, through AOP proxies, remembering the classes that
 * have none, and handing each method found to {@link #register}. Ordered last, so that
 * the bean it sees is the one other post-processors made.
 *
 * @param <A> the listener annotation
 */
abstract class ListenerAnnotationBeanPostProcessor<A extends Annotation>
		implements BeanPostProcessor, SmartInitializingSingleton, BeanFactoryAware, Ordered {

	private final Class<A> annotationType;

	private final Set<Class<?>> nonAnnotatedClasses = ConcurrentHashMap.newKeySet();

	@Nullable BeanFactory beanFactory;

	ListenerAnnotationBeanPostProcessor(Class<A> annotationType) {
		this.annotationType = annotationType;
	}

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = beanFactory;
	}

	@Override
	public int getOrder() {
		return LOWEST_PRECEDENCE;
	}

	@Override
	public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
		Class<?> targetClass = AopUtils.getTargetClass(bean);
		if (nonAnnotatedClasses.contains(targetClass)
				|| !AnnotationUtils.isCandidateClass(targetClass, annotationType)) {
			return bean;
		}
		Map<Method, A> methods = MethodIntrospector.selectMethods(targetClass,
				(MethodIntrospector.MetadataLookup<A>) m -> AnnotatedElementUtils.findMergedAnnotation(m,
						annotationType));
		if (methods.isEmpty()) {
			nonAnnotatedClasses.add(targetClass);
			return bean;
		}
		methods.forEach((method, annotation) -> register(bean, beanName, method, annotation));
		return bean;
	}

	/**
	 * Checks and records the listener {@code method} of bean {@code beanName}, annotated
	 * with {@code annotation}.
	 * @throws dev.rdma.spring.RdmaConfigurationException naming the listener when it
	 * cannot run
	 */
	abstract void register(Object bean, String beanName, Method method, A annotation);

}
