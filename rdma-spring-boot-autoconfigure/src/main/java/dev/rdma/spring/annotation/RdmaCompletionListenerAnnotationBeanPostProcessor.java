package dev.rdma.spring.annotation;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ListableBeanFactory;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.config.RdmaListenerEndpointValidator;
import dev.rdma.spring.listener.ListenerInvoker;
import dev.rdma.spring.listener.RdmaCompletionErrorHandler;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.WorkCompletion;

/**
 * Finds {@link RdmaCompletionListener} methods on every bean (through AOP proxies),
 * checks each (an instance method with one parameter it can supply; its queue and fields
 * through the {@link RdmaListenerEndpointValidator} bean, if any), binds it to a
 * {@link ListenerInvoker} and, once all singletons exist, registers an
 * {@link RdmaListenerEndpoint} per listener with the
 * {@link RdmaListenerEndpointRegistry}, which asks the
 * {@value RdmaListenerContainerFactory#DEFAULT_BEAN_NAME} bean for its container. A
 * listener of a bean created later (lazy, prototype) is registered when its bean is
 * created, and started at once when the registry runs. A listener that cannot be bound
 * fails the creation of its bean with a {@link RdmaConfigurationException} naming it.
 */
public class RdmaCompletionListenerAnnotationBeanPostProcessor
		extends ListenerAnnotationBeanPostProcessor<RdmaCompletionListener> {

	/** Bean name of this post-processor. */
	public static final String BEAN_NAME = "rdmaCompletionListenerAnnotationBeanPostProcessor";

	private static final Log logger = LogFactory.getLog(RdmaCompletionListenerAnnotationBeanPostProcessor.class);

	private final Map<String, RdmaListenerEndpoint> endpointsByQueue = new LinkedHashMap<>();

	private @Nullable RdmaListenerEndpointValidator validator;

	private @Nullable String checkOnly;

	/** Set once all singletons exist: an endpoint found later is registered at once. */
	private boolean singletonsInstantiated;

	/** A post-processor for {@code @RdmaCompletionListener} methods. */
	public RdmaCompletionListenerAnnotationBeanPostProcessor() {
		super(RdmaCompletionListener.class);
	}

	/**
	 * The validator to use; when none is set, the {@link RdmaListenerEndpointValidator}
	 * bean, if there is one.
	 */
	public void setEndpointValidator(RdmaListenerEndpointValidator validator) {
		this.validator = validator;
	}

	/**
	 * Makes this post-processor check each listener (as always) but start none: for an
	 * application where RDMA backed off, so that a listener on an unknown queue fails
	 * startup on a machine without RDMA too.
	 * @param reason why no listener starts, for the log
	 */
	public void setCheckOnly(String reason) {
		this.checkOnly = reason;
	}

	private RdmaListenerEndpointValidator validator() {
		RdmaListenerEndpointValidator v = validator;
		if (v == null) {
			BeanFactory factory = beanFactory;
			v = factory == null ? RdmaListenerEndpointValidator.NONE
					: factory.getBeanProvider(RdmaListenerEndpointValidator.class)
						.getIfAvailable(() -> RdmaListenerEndpointValidator.NONE);
			validator = v;
		}
		return v;
	}

	@Override
	synchronized void register(Object bean, String beanName, Method method, RdmaCompletionListener annotation) {
		String id = RdmaListenerEndpoint.describe(beanName, method);
		String queue = annotation.queue();
		if (Modifier.isStatic(method.getModifiers())) {
			throw error(id, id + " is static", "Make the listener method an instance method.");
		}
		validator().validateQueue(id, queue);
		Class<?>[] parameters = method.getParameterTypes();
		if (parameters.length != 1) {
			throw error(id,
					id + " has " + parameters.length + " parameters; a listener takes exactly one: "
							+ (annotation.batch() ? "CompletionBatch" : "WorkCompletion"),
					"Declare the method as void " + method.getName() + "("
							+ (annotation.batch() ? "CompletionBatch batch" : "WorkCompletion completion") + ").");
		}
		Class<?> parameter = parameters[0];
		boolean takesBatch = parameter != Object.class && parameter.isAssignableFrom(CompletionBatch.class);
		boolean takesSingle = parameter != Object.class && parameter.isAssignableFrom(WorkCompletion.class);
		if (annotation.batch() && !takesBatch) {
			throw error(id,
					id + " is declared batch = true but its parameter is " + parameter.getSimpleName()
							+ ", not CompletionBatch",
					takesSingle ? "Remove batch = true, or take a CompletionBatch."
							: "Take a CompletionBatch parameter.");
		}
		if (!annotation.batch() && !takesSingle) {
			throw error(id,
					id + " takes a " + parameter.getSimpleName()
							+ (takesBatch ? " but is not declared batch = true"
									: ", which a completion listener cannot supply"),
					takesBatch ? "Add batch = true to the annotation."
							: "Take a WorkCompletion (or, with batch = true, a CompletionBatch).");
		}
		validator().validateFields(id, queue, List.of(annotation.fields()));
		RdmaListenerEndpoint previous = endpointsByQueue.get(queue);
		if (previous != null) {
			throw error(id,
					"queue '" + queue + "' has two listeners: " + previous.id() + " and " + id
							+ "; a queue is drained by exactly one listener",
					"Remove one of the listeners, or configure a second queue.");
		}
		String errorHandler = annotation.errorHandler().isBlank() ? null : annotation.errorHandler();
		if (errorHandler != null) {
			checkErrorHandler(id, errorHandler);
		}
		ListenerInvoker invoker = ListenerMethods.invoker(id, bean, method);
		RdmaListenerEndpoint endpoint = new RdmaListenerEndpoint(id, beanName, method, queue, annotation.batch(),
				errorHandler, invoker);
		endpointsByQueue.put(queue, endpoint);
		if (singletonsInstantiated) {
			// a lazy or prototype bean, created after startup: registered (and started,
			// when the registry runs) now, as spring-kafka does with a late
			// @KafkaListener
			try {
				registerLate(endpoint);
			}
			catch (RuntimeException ex) {
				endpointsByQueue.remove(queue);
				throw ex;
			}
		}
	}

	private void registerLate(RdmaListenerEndpoint endpoint) {
		if (checkOnly != null) {
			logChecked(endpoint);
			return;
		}
		BeanFactory factory = beanFactory;
		if (factory == null) {
			return;
		}
		factory.getBean(RdmaListenerEndpointRegistry.BEAN_NAME, RdmaListenerEndpointRegistry.class)
			.registerListenerContainer(endpoint,
					factory.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME, RdmaListenerContainerFactory.class),
					true);
	}

	private void logChecked(RdmaListenerEndpoint endpoint) {
		logger.info(endpoint.id() + " on queue '" + endpoint.queue()
				+ "' checked against the configuration; it will not run (" + checkOnly + ")");
	}

	/**
	 * The error handler must be a {@link RdmaCompletionErrorHandler} bean: checked here,
	 * with or without a device, rather than only when the container is made.
	 */
	private void checkErrorHandler(String id, String name) {
		if (!(beanFactory instanceof ListableBeanFactory factory)) {
			return;
		}
		if (!factory.containsBean(name) || !factory.isTypeMatch(name, RdmaCompletionErrorHandler.class)) {
			throw error(id, id + " names errorHandler '" + name + "', which is not a RdmaCompletionErrorHandler bean",
					"Define a bean named '" + name
							+ "' implementing RdmaCompletionErrorHandler, or remove errorHandler.");
		}
	}

	private static RdmaConfigurationException error(String id, String reason, String action) {
		return new RdmaConfigurationException(id, reason, action);
	}

	/** The endpoints found so far. */
	public synchronized List<RdmaListenerEndpoint> endpoints() {
		return new ArrayList<>(endpointsByQueue.values());
	}

	@Override
	public void afterSingletonsInstantiated() {
		List<RdmaListenerEndpoint> endpoints;
		synchronized (this) {
			endpoints = endpoints();
			singletonsInstantiated = true;
		}
		BeanFactory factory = beanFactory;
		if (checkOnly != null) {
			endpoints.forEach(this::logChecked);
			return;
		}
		if (endpoints.isEmpty() || factory == null) {
			return;
		}
		RdmaListenerEndpointRegistry registry = factory.getBean(RdmaListenerEndpointRegistry.BEAN_NAME,
				RdmaListenerEndpointRegistry.class);
		RdmaListenerContainerFactory containerFactory = factory.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME,
				RdmaListenerContainerFactory.class);
		for (RdmaListenerEndpoint endpoint : endpoints) {
			registry.registerListenerContainer(endpoint, containerFactory);
		}
	}

}
