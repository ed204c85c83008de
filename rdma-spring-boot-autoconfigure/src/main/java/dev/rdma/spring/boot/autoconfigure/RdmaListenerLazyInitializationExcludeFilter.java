package dev.rdma.spring.boot.autoconfigure;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.LazyInitializationExcludeFilter;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationUtils;
import org.springframework.util.ClassUtils;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.annotation.RdmaMessageListener;

/**
 * Keeps beans with {@link RdmaCompletionListener} or {@link RdmaMessageListener} methods
 * eager under {@code spring.main.lazy-initialization=true}, as Spring Boot does for
 * {@code @Scheduled} beans: a listener bean that nothing injects would otherwise never be
 * created, so its listener would never run nor be checked.
 */
class RdmaListenerLazyInitializationExcludeFilter implements LazyInitializationExcludeFilter {

	private final Set<Class<?>> withoutListeners = ConcurrentHashMap.newKeySet();

	@Override
	public boolean isExcluded(String beanName, BeanDefinition beanDefinition, Class<?> beanType) {
		Class<?> type = ClassUtils.getUserClass(beanType);
		if (withoutListeners.contains(type)) {
			return false;
		}
		if (hasListener(type)) {
			return true;
		}
		withoutListeners.add(type);
		return false;
	}

	private static boolean hasListener(Class<?> type) {
		if (!AnnotationUtils.isCandidateClass(type, Set.of(RdmaCompletionListener.class, RdmaMessageListener.class))) {
			return false;
		}
		return !MethodIntrospector
			.selectMethods(type,
					(MethodIntrospector.MetadataLookup<Boolean>) m -> (AnnotatedElementUtils.hasAnnotation(m,
							RdmaCompletionListener.class)
							|| AnnotatedElementUtils.hasAnnotation(m, RdmaMessageListener.class)) ? Boolean.TRUE : null)
			.isEmpty();
	}

}
