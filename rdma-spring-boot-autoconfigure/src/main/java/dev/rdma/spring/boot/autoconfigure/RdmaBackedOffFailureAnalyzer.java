package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.NoSuchBeanDefinitionException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.core.Ordered;
import org.springframework.core.ResolvableType;

/**
 * Explains a missing RDMA bean ({@code dev.rdma.*}, e.g. an injected {@code Context} or
 * {@code CompletionQueue}) when the RDMA auto-configuration backed off: says why it
 * backed off and how to run with and without RDMA, instead of Boot's generic "required a
 * bean that could not be found". Ordered before Boot's analyzer of the same exception.
 * Returns nothing when RDMA is available (then the bean is missing for another reason,
 * which Boot's analyzer explains).
 */
public class RdmaBackedOffFailureAnalyzer extends AbstractFailureAnalyzer<NoSuchBeanDefinitionException>
		implements Ordered {

	@Override
	public int getOrder() {
		return Ordered.HIGHEST_PRECEDENCE;
	}

	@Override
	protected @Nullable FailureAnalysis analyze(Throwable rootFailure, NoSuchBeanDefinitionException cause) {
		ResolvableType type = cause.getResolvableType();
		Class<?> missing = type == null ? null : type.resolve();
		if (missing == null || !missing.getName().startsWith("dev.rdma.")) {
			return null;
		}
		String problem = OnRdmaAvailableCondition.problem();
		if (problem == null) {
			return null;
		}
		String description = "A component required a bean of type '" + missing.getName()
				+ "' that could not be found: the RDMA auto-configuration backed off because " + problem
				+ ", so there are no RDMA beans (devices, channels, completion queues, listeners).";
		String action = "To run only with RDMA, set rdma.required=true: startup then fails naming what is missing."
				+ " To run with and without RDMA, inject ObjectProvider<" + missing.getSimpleName()
				+ "> (getIfAvailable() is null without RDMA) or ask the " + RdmaStatus.BEAN_NAME
				+ " bean (dev.rdma.spring.boot.autoconfigure.RdmaStatus) whether RDMA is active and why not.";
		return new FailureAnalysis(description, action, cause);
	}

}
