package dev.rdma.spring.annotation;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.BeanFactory;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.MessageListenerBinding;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.spring.listener.ListenerInvoker;

/**
 * Finds {@link RdmaMessageListener} methods on every bean (through AOP proxies), checks
 * each (an instance method taking one {@link RdmaMessage}), binds it to a
 * {@link ListenerInvoker} and, once all singletons exist, hands it to the
 * {@link RdmaConnectionRegistry}, which checks the connection name. A listener that
 * cannot be bound fails startup with a {@link RdmaConfigurationException} naming it.
 */
public class RdmaMessageListenerAnnotationBeanPostProcessor
		extends ListenerAnnotationBeanPostProcessor<RdmaMessageListener> {

	/** Bean name of this post-processor. */
	public static final String BEAN_NAME = "rdmaMessageListenerAnnotationBeanPostProcessor";

	private static final Log logger = LogFactory.getLog(RdmaMessageListenerAnnotationBeanPostProcessor.class);

	private final List<Map.Entry<String, MessageListenerBinding>> found = new ArrayList<>();

	private @Nullable String checkOnly;

	private List<String> connections = List.of();

	/** Set once all singletons exist: a listener found later is handed over at once. */
	private boolean singletonsInstantiated;

	/** A post-processor for {@code @RdmaMessageListener} methods. */
	public RdmaMessageListenerAnnotationBeanPostProcessor() {
		super(RdmaMessageListener.class);
	}

	/**
	 * Makes this post-processor check each listener (its parameter and the connection it
	 * names) but hand none over: for an application where RDMA backed off, so that a
	 * listener mistake fails startup on a machine without RDMA too.
	 * @param reason why no listener runs, for the log
	 * @param connections the keys under {@code rdma.connections}
	 */
	public void setCheckOnly(String reason, List<String> connections) {
		this.checkOnly = reason;
		this.connections = List.copyOf(connections);
	}

	@Override
	synchronized void register(Object bean, String beanName, Method method, RdmaMessageListener annotation) {
		String id = RdmaListenerEndpoint.describe(beanName, method)
			.replace("@RdmaCompletionListener", "@RdmaMessageListener");
		if (Modifier.isStatic(method.getModifiers())) {
			throw new RdmaConfigurationException(id, id + " is static", "Make the listener method an instance method.");
		}
		Class<?>[] parameters = method.getParameterTypes();
		if (parameters.length != 1 || !parameters[0].isAssignableFrom(RdmaMessage.class)
				|| parameters[0] == Object.class) {
			throw new RdmaConfigurationException(id, id + " must take exactly one RdmaMessage parameter",
					"Declare the method as void " + method.getName() + "(RdmaMessage message).");
		}
		if (annotation.connection().isBlank()) {
			throw new RdmaConfigurationException(id, id + " names no connection",
					"Set connection to a key under rdma.connections.");
		}
		if (checkOnly != null) {
			RdmaConnectionRegistry.checkConnection(id, annotation.connection(), connections);
		}
		Map.Entry<String, MessageListenerBinding> listener = Map.entry(annotation.connection(),
				new MessageListenerBinding(id, ListenerMethods.invoker(id, bean, method)));
		if (singletonsInstantiated) {
			registerLate(beanName, listener);
		}
		found.add(listener);
	}

	/**
	 * A listener of a bean created after startup (lazy, prototype): handed to the
	 * registry while the connections have not started; refused once they run, as a
	 * connection hands its listener to each peer when the peer connects.
	 */
	private void registerLate(String beanName, Map.Entry<String, MessageListenerBinding> listener) {
		BeanFactory factory = beanFactory;
		RdmaConnectionRegistry registry = (factory != null && checkOnly == null)
				? factory.getBeanProvider(RdmaConnectionRegistry.class).getIfAvailable() : null;
		if (registry == null) {
			logNotRunning(listener);
			return;
		}
		String id = listener.getValue().id();
		if (registry.isRunning()) {
			throw new RdmaConfigurationException(id,
					id + " belongs to a bean created after the RDMA connections started (a lazy or prototype "
							+ "bean): connection '" + listener.getKey() + "' would deliver no message to it",
					"Make bean '" + beanName + "' a singleton created at startup (remove @Lazy or its scope).");
		}
		registry.registerListener(listener.getKey(), listener.getValue());
	}

	private void logNotRunning(Map.Entry<String, MessageListenerBinding> listener) {
		logger.info(listener.getValue().id() + " on connection '" + listener.getKey() + "' will not run: "
				+ ((checkOnly != null) ? "checked against the configuration (" + checkOnly + ")"
						: "no RDMA connections in this application"));
	}

	/** The listeners found so far, by connection name. */
	public synchronized List<Map.Entry<String, MessageListenerBinding>> listeners() {
		return new ArrayList<>(found);
	}

	@Override
	public void afterSingletonsInstantiated() {
		List<Map.Entry<String, MessageListenerBinding>> listeners;
		synchronized (this) {
			listeners = listeners();
			singletonsInstantiated = true;
		}
		BeanFactory factory = beanFactory;
		if (listeners.isEmpty() || factory == null) {
			return;
		}
		RdmaConnectionRegistry registry = (checkOnly != null) ? null
				: factory.getBeanProvider(RdmaConnectionRegistry.class).getIfAvailable();
		if (registry == null) {
			// RDMA backed off (no device and rdma.required=false): no connection runs
			listeners.forEach(this::logNotRunning);
			return;
		}
		listeners.forEach(e -> registry.registerListener(e.getKey(), e.getValue()));
	}

}
