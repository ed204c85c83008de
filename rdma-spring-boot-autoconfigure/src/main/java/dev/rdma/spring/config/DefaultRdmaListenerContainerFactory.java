package dev.rdma.spring.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.NoSuchBeanDefinitionException;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.listener.CompletionEventRouter;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollerMetrics;
import dev.rdma.spring.listener.PollerSettings;
import dev.rdma.spring.listener.RdmaCompletionErrorHandler;
import dev.rdma.verbs.CompletionQueue;

/**
 * Makes a {@link CompletionQueueListenerContainer} per listener: looks up the queue bean
 * and the error handler bean by name, gives the container the queue's
 * {@link PollerSettings} (or the default settings), the queue's {@link PollerMetrics} and
 * the listener, then applies the {@link RdmaListenerContainerCustomizer}s in order. The
 * containers it makes share one {@link CompletionEventRouter}, so queues sharing a
 * completion channel wake each other. A queue {@link #setPollerGroup assigned to a poller
 * group} is polled by that {@link PollerGroup}'s threads (one group object per name, made
 * on first use from {@link #setPollerGroupSettings its settings}); any other by a
 * dedicated thread.
 *
 * <p>
 * Configure it before the listeners are registered (the starter's
 * {@code RdmaListenerContainerFactoryConfigurer} does so from the {@code rdma.*}
 * properties); it must be a bean, or be given a {@link BeanFactory}.
 */
public class DefaultRdmaListenerContainerFactory implements RdmaListenerContainerFactory, BeanFactoryAware {

	private final Map<String, PollerSettings> pollerSettings = new LinkedHashMap<>();

	private PollerSettings defaultPollerSettings = PollerSettings.DEFAULTS;

	private PollerMetrics.Factory metrics = PollerMetrics.Factory.NONE;

	private final List<RdmaListenerContainerCustomizer> customizers = new ArrayList<>();

	private final CompletionEventRouter router = new CompletionEventRouter();

	private final Map<String, PollerGroupSettings> groupSettings = new LinkedHashMap<>();

	private final Map<String, String> queueGroups = new LinkedHashMap<>();

	private final Map<String, PollerGroup> groups = new LinkedHashMap<>();

	private @Nullable BeanFactory beanFactory;

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = beanFactory;
	}

	/** The settings of the poller of {@code queue}. */
	public void setPollerSettings(String queue, PollerSettings settings) {
		pollerSettings.put(queue, Objects.requireNonNull(settings, "settings"));
	}

	/** The settings of the pollers of queues without settings of their own. */
	public void setDefaultPollerSettings(PollerSettings settings) {
		this.defaultPollerSettings = Objects.requireNonNull(settings, "settings");
	}

	/**
	 * The settings a container for {@code queue} starts with.
	 */
	public PollerSettings getPollerSettings(String queue) {
		return pollerSettings.getOrDefault(queue, defaultPollerSettings);
	}

	/**
	 * The settings of poller group {@code group}; a group without settings of its own
	 * (only {@link PollerGroup#DEFAULT} may be used so) has
	 * {@link PollerGroupSettings#DEFAULTS}.
	 */
	public synchronized void setPollerGroupSettings(String group, PollerGroupSettings settings) {
		groupSettings.put(group, Objects.requireNonNull(settings, "settings"));
	}

	/**
	 * Puts the poller of {@code queue} in poller group {@code group}; null or
	 * {@link PollerGroup#DEDICATED} for a dedicated thread (the default).
	 */
	public synchronized void setPollerGroup(String queue, @Nullable String group) {
		if (group == null || group.equals(PollerGroup.DEDICATED)) {
			queueGroups.remove(queue);
		}
		else {
			queueGroups.put(queue, group);
		}
	}

	/**
	 * The poller group of {@code queue}, made on first use; null for a dedicated poller.
	 * @throws IllegalStateException when the queue names a group that has no settings
	 * (other than {@link PollerGroup#DEFAULT})
	 */
	public synchronized @Nullable PollerGroup getPollerGroup(String queue) {
		String name = queueGroups.get(queue);
		if (name == null) {
			return null;
		}
		PollerGroup group = groups.get(name);
		if (group == null) {
			PollerGroupSettings settings = groupSettings.get(name);
			if (settings == null && !name.equals(PollerGroup.DEFAULT)) {
				throw new IllegalStateException("queue '" + queue + "' names poller group '" + name
						+ "', which is not configured (configured: " + groupSettings.keySet() + ")");
			}
			group = new PollerGroup(name, settings == null ? PollerGroupSettings.DEFAULTS : settings, router);
			groups.put(name, group);
		}
		return group;
	}

	/**
	 * Where the pollers report; {@link PollerMetrics.Factory#NONE} (the default) reports
	 * nothing.
	 */
	public void setMetrics(PollerMetrics.Factory metrics) {
		this.metrics = Objects.requireNonNull(metrics, "metrics");
	}

	/**
	 * A queue of a poller group polls in the group's mode and spin: a customizer that
	 * changes them (or max-sleep, a dedicated poller's) would change nothing, so it is
	 * refused rather than silently ignored.
	 */
	private static void checkGroupSettingsUnchanged(RdmaListenerEndpoint endpoint,
			CompletionQueueListenerContainer container, PollerSettings before) {
		PollerGroup group = container.getPollerGroup();
		PollerSettings after = container.getSettings();
		if (group == null) {
			return;
		}
		List<String> changed = new ArrayList<>();
		if (after.mode() != before.mode()) {
			changed.add("mode " + after.mode());
		}
		if (!after.spin().equals(before.spin())) {
			changed.add("spin " + after.spin());
		}
		if (!after.maxSleep().equals(before.maxSleep())) {
			changed.add("maxSleep " + after.maxSleep());
		}
		if (!changed.isEmpty()) {
			throw new RdmaConfigurationException(endpoint.id(),
					"a RdmaListenerContainerCustomizer set " + changed + " in the settings of the container of queue '"
							+ endpoint.queue() + "', but the queue is polled by poller group '" + group.name()
							+ "', whose mode and spin apply (rdma.pollers." + group.name() + ".*)",
					"Change rdma.pollers." + group.name() + ", or give the queue a dedicated poller: "
							+ "rdma.completion-queues." + endpoint.queue()
							+ ".poller=dedicated, or container.setPollerGroup(null) in the customizer.");
		}
	}

	/** Replaces the customizers; they run in the given order on each container. */
	public void setContainerCustomizers(List<? extends RdmaListenerContainerCustomizer> customizers) {
		this.customizers.clear();
		this.customizers.addAll(customizers);
	}

	public void addContainerCustomizer(RdmaListenerContainerCustomizer customizer) {
		this.customizers.add(Objects.requireNonNull(customizer, "customizer"));
	}

	@Override
	public CompletionQueueListenerContainer createListenerContainer(RdmaListenerEndpoint endpoint) {
		BeanFactory factory = this.beanFactory;
		if (factory == null) {
			throw new IllegalStateException(
					"DefaultRdmaListenerContainerFactory has no BeanFactory: define it as a bean");
		}
		RdmaCompletionErrorHandler errorHandler = null;
		String errorHandlerName = endpoint.errorHandler();
		if (errorHandlerName != null) {
			try {
				errorHandler = factory.getBean(errorHandlerName, RdmaCompletionErrorHandler.class);
			}
			catch (BeansException ex) {
				throw new RdmaConfigurationException(endpoint.id(),
						endpoint.id() + " names errorHandler '" + errorHandlerName
								+ "', which is not a RdmaCompletionErrorHandler bean",
						"Define a bean named '" + errorHandlerName
								+ "' implementing RdmaCompletionErrorHandler, or remove errorHandler.",
						ex);
			}
		}
		CompletionQueue queue;
		try {
			queue = factory.getBean(endpoint.queue(), CompletionQueue.class);
		}
		catch (NoSuchBeanDefinitionException ex) {
			throw new RdmaConfigurationException(endpoint.id(),
					endpoint.id() + " listens to queue '" + endpoint.queue()
							+ "', but no completion queue bean of that name exists",
					"Check that RDMA auto-configuration is active (rdma.required=true shows why it is not).", ex);
		}
		CompletionQueueListenerContainer container = new CompletionQueueListenerContainer(endpoint.queue(), queue,
				getPollerSettings(endpoint.queue()), router);
		try {
			container.setupListener(endpoint.id(), endpoint.invoker(), endpoint.batch());
			container.setErrorHandler(errorHandlerName, errorHandler);
			container.setMetrics(metrics.forQueue(endpoint.queue()));
			container.setPollerGroup(getPollerGroup(endpoint.queue()));
			PollerSettings before = container.getSettings();
			for (RdmaListenerContainerCustomizer customizer : customizers) {
				customizer.customize(container);
			}
			checkGroupSettingsUnchanged(endpoint, container, before);
		}
		catch (RuntimeException ex) {
			container.awaitStop(System.nanoTime()); // never started: frees its waker
			throw ex;
		}
		return container;
	}

}
