package dev.rdma.spring.connection.support;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableBeanFactory;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.ApplicationEventPublisherAware;
import org.springframework.context.SmartLifecycle;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.RdmaListenerContainerFactory;
import dev.rdma.spring.connection.RdmaConnectionFilter;
import dev.rdma.spring.config.RdmaListenerEndpoint;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.spring.listener.Lifecycles;
import dev.rdma.verbs.CompletionQueue;

/**
 * Every connection under {@code rdma.connections}, and their lifecycle.
 *
 * <p>
 * <b>Completions.</b> Once all singletons exist, the registry gives each completion queue
 * a connection uses a {@link CompletionRouter} as its listener, through the
 * {@link RdmaListenerEndpointRegistry} and the container factory: the queue gets the
 * poller its properties describe (dedicated or a group), like a queue with an
 * {@code @RdmaCompletionListener} (which it therefore cannot have too).
 *
 * <p>
 * <b>Phases.</b> A {@link SmartLifecycle} in phase {@link #PHASE}, after the listener
 * registry's: connections start (clients connect, servers listen) once the pollers run,
 * and stop (disconnect, flush, drain through the pollers, destroy) before the pollers
 * stop, all within {@code rdma.shutdown-timeout}. The registry depends on the queues'
 * beans, so it is destroyed before them.
 *
 * <p>
 * <b>Events.</b> The connections publish their {@code dev.rdma.spring.connection.event}
 * events through the application context's publisher, which the context hands this
 * registry.
 */
public class RdmaConnectionRegistry implements SmartLifecycle, SmartInitializingSingleton, BeanFactoryAware,
		ApplicationEventPublisherAware, DisposableBean {

	/** Bean name of the registry. */
	public static final String BEAN_NAME = "rdmaConnectionRegistry";

	/** After the listener registry ({@code Integer.MAX_VALUE - 100}). */
	public static final int PHASE = Integer.MAX_VALUE - 50;

	private static final Log logger = LogFactory.getLog(RdmaConnectionRegistry.class);

	private static final Method ROUTE;

	static {
		try {
			ROUTE = CompletionRouter.class.getMethod("invoke", Object.class);
		}
		catch (NoSuchMethodException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final List<ConnectionSettings> settings;

	private final Duration shutdownTimeout;

	private final Map<String, CompletionRouter> routers = new LinkedHashMap<>();

	private final Map<String, ConfiguredConnection> connections = new LinkedHashMap<>();

	/** {@link #connections()} once every connection is made (none is ever removed). */
	private volatile @Nullable List<ConfiguredConnection> all;

	private final Map<String, MessageListenerBinding> listeners = Collections.synchronizedMap(new LinkedHashMap<>());

	private Map<String, List<AddressRange>> allowedPeers = Map.of();

	private @Nullable BeanFactory beanFactory;

	private volatile @Nullable ApplicationEventPublisher publisher;

	private volatile boolean running;

	public RdmaConnectionRegistry(List<ConnectionSettings> settings, Duration shutdownTimeout) {
		this.settings = List.copyOf(settings);
		this.shutdownTimeout = Objects.requireNonNull(shutdownTimeout, "shutdownTimeout");
	}

	/**
	 * The {@code allowed-peers} of the server connections (by name; a server missing here
	 * admits every address), before the connections are made.
	 * @return this registry
	 */
	public RdmaConnectionRegistry allowedPeers(Map<String, List<AddressRange>> allowedPeers) {
		this.allowedPeers = Map.copyOf(allowedPeers);
		return this;
	}

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = beanFactory;
	}

	@Override
	public void setApplicationEventPublisher(ApplicationEventPublisher publisher) {
		this.publisher = publisher;
	}

	private BeanFactory factory() {
		BeanFactory f = beanFactory;
		if (f == null) {
			throw new IllegalStateException("RdmaConnectionRegistry has no BeanFactory: define it as a bean");
		}
		return f;
	}

	/**
	 * The connection of {@code rdma.connections.<name>} (the supplier of its bean); made
	 * on first use, started with the registry.
	 */
	public synchronized ConfiguredConnection connection(String name) {
		ConfiguredConnection existing = connections.get(name);
		if (existing != null) {
			return existing;
		}
		ConnectionSettings s = settings.stream()
			.filter(c -> c.name().equals(name))
			.findFirst()
			.orElseThrow(() -> new IllegalArgumentException("no connection '" + name + "' under rdma.connections"));
		BeanFactory f = factory();
		CompletionQueue sendCq = f.getBean(s.sendQueue(), CompletionQueue.class);
		CompletionQueue receiveCq = f.getBean(s.receiveQueue(), CompletionQueue.class);
		List<CompletionRouter> used = s.sendQueue().equals(s.receiveQueue()) ? List.of(router(s.sendQueue()))
				: List.of(router(s.sendQueue()), router(s.receiveQueue()));
		if (f instanceof ConfigurableBeanFactory configurable) {
			configurable.registerDependentBean(s.sendQueue(), BEAN_NAME);
			configurable.registerDependentBean(s.receiveQueue(), BEAN_NAME);
		}
		Supplier<@Nullable MessageListenerBinding> listener = () -> listeners.get(name);
		ConfiguredConnection c;
		if (s.server()) {
			ServerConnection server = new ServerConnection(s, sendCq, receiveCq, used, listener);
			server.admission(new PeerAdmission("rdma.connections." + name + ".allowed-peers",
					allowedPeers.getOrDefault(name, List.of()),
					() -> f.getBeanProvider(RdmaConnectionFilter.class).orderedStream().toList()));
			c = server;
		}
		else {
			c = new ClientConnection(s, sendCq, receiveCq, used, listener);
		}
		c.setEventPublisher((event) -> {
			ApplicationEventPublisher p = this.publisher;
			if (p != null) {
				p.publishEvent(event);
			}
		});
		connections.put(name, c);
		return c;
	}

	private CompletionRouter router(String queue) {
		return routers.computeIfAbsent(queue, CompletionRouter::new);
	}

	/**
	 * Every connection, in configuration order (made on first use). Once all are made,
	 * read without the registry's lock: a health check or a meter during a
	 * {@link #stop()}, which holds the lock while the connections close, gets them at
	 * once.
	 */
	public List<ConfiguredConnection> connections() {
		List<ConfiguredConnection> made = all;
		if (made != null) {
			return made;
		}
		synchronized (this) {
			if (all == null) {
				List<ConfiguredConnection> list = new ArrayList<>();
				for (ConnectionSettings s : settings) {
					list.add(connection(s.name()));
				}
				all = List.copyOf(list);
			}
			return all;
		}
	}

	/** The names under {@code rdma.connections}. */
	public List<String> names() {
		return settings.stream().map(ConnectionSettings::name).toList();
	}

	/**
	 * Sets the message listener of connection {@code name}.
	 * @throws RdmaConfigurationException when no such connection is configured, or it has
	 * a listener already
	 */
	public void registerListener(String name, MessageListenerBinding binding) {
		checkConnection(binding.id(), name, names());
		MessageListenerBinding previous = listeners.putIfAbsent(name, binding);
		if (previous != null) {
			throw new RdmaConfigurationException(binding.id(),
					"connection '" + name + "' has two message listeners: " + previous.id() + " and " + binding.id(),
					"Keep one listener per connection.");
		}
	}

	/**
	 * Checks that listener {@code id} names one of the configured connections.
	 * @param id how messages name the listener
	 * @param name the connection it names
	 * @param names the keys under {@code rdma.connections}
	 * @throws RdmaConfigurationException when {@code name} is not one of them
	 */
	public static void checkConnection(String id, String name, List<String> names) {
		if (!names.contains(name)) {
			throw new RdmaConfigurationException(
					id, id + " listens to connection '" + name + "', which is not configured (rdma.connections: "
							+ names + ")",
					"Add rdma.connections." + name + ".listen or .connect, or fix the connection name.");
		}
	}

	/** The listener of a connection, or null. */
	public @Nullable MessageListenerBinding listener(String name) {
		return listeners.get(name);
	}

	@Override
	public void afterSingletonsInstantiated() {
		connections(); // every connection made: its queues have routers
		BeanFactory f = factory();
		if (routers.isEmpty()) {
			return;
		}
		RdmaListenerEndpointRegistry registry = f.getBean(RdmaListenerEndpointRegistry.BEAN_NAME,
				RdmaListenerEndpointRegistry.class);
		RdmaListenerContainerFactory containerFactory = f.getBean(RdmaListenerContainerFactory.DEFAULT_BEAN_NAME,
				RdmaListenerContainerFactory.class);
		for (CompletionRouter router : routers.values()) {
			String id = "rdma.connections router of queue '" + router.queue() + "'";
			if (registry.getListenerContainer(router.queue()) != null) {
				throw new RdmaConfigurationException(id,
						"queue '" + router.queue() + "' is used by rdma.connections and also has a listener",
						"Give the connections queues of their own, without @RdmaCompletionListener.");
			}
			registry.registerListenerContainer(
					new RdmaListenerEndpoint(id, BEAN_NAME, ROUTE, router.queue(), false, null, router),
					containerFactory);
		}
	}

	@Override
	public synchronized void start() {
		if (running) {
			return;
		}
		Lifecycles.startAll(connections(), ConfiguredConnection::start, this::stop);
		running = true;
	}

	@Override
	public synchronized void stop() {
		if (!running) {
			return;
		}
		running = false;
		stop(connections());
	}

	private void stop(List<ConfiguredConnection> list) {
		long deadline = Deadlines.after(shutdownTimeout);
		for (int i = list.size() - 1; i >= 0; i--) {
			try {
				list.get(i).stop(deadline);
			}
			catch (RuntimeException ex) {
				logger.warn("Stopping RDMA connection '" + list.get(i).name() + "' failed", ex);
			}
		}
	}

	@Override
	public boolean isRunning() {
		return running;
	}

	@Override
	public int getPhase() {
		return PHASE;
	}

	@Override
	public void destroy() {
		stop();
	}

	/** The router of a queue, or null (for tests and meters). */
	public @Nullable CompletionRouter routerOf(String queue) {
		return routers.get(queue);
	}

}
