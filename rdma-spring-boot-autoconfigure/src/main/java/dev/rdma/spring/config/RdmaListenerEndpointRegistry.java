package dev.rdma.spring.config;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.config.ConfigurableBeanFactory;
import org.springframework.context.SmartLifecycle;

import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.Deadlines;
import dev.rdma.spring.listener.Lifecycles;

/**
 * Holds one {@link CompletionQueueListenerContainer} per queue with a listener, each made
 * by a {@link RdmaListenerContainerFactory}, and runs them as a {@link SmartLifecycle}
 * (phase {@code Integer.MAX_VALUE - 100}): they start after the application's own
 * lifecycle beans and stop before them, and the connections (phase
 * {@code Integer.MAX_VALUE - 50}) start once the pollers run and stop before they stop.
 * The registry registers itself as a dependant of every queue it polls, so the container
 * destroys it (stopping any poller still running) before it closes those queues.
 *
 * <p>
 * Stopped on a poller thread (a listener that closes the context), it does not wait for
 * that thread, which cannot stop before the listener returns: see
 * {@link CompletionQueueListenerContainer}.
 */
public class RdmaListenerEndpointRegistry implements SmartLifecycle, DisposableBean, BeanFactoryAware {

	/** Bean name of the registry. */
	public static final String BEAN_NAME = "rdmaListenerEndpointRegistry";

	private static final Log logger = LogFactory.getLog(RdmaListenerEndpointRegistry.class);

	private final Map<String, CompletionQueueListenerContainer> containers = new LinkedHashMap<>();

	private Duration shutdownTimeout = Duration.ofSeconds(5);

	private @Nullable BeanFactory beanFactory;

	private volatile boolean running;

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = beanFactory;
	}

	/**
	 * How long {@link #stop()} waits, for all pollers together, for their batches in
	 * flight.
	 */
	public void setShutdownTimeout(Duration shutdownTimeout) {
		this.shutdownTimeout = Objects.requireNonNull(shutdownTimeout, "shutdownTimeout");
	}

	public Duration getShutdownTimeout() {
		return shutdownTimeout;
	}

	/**
	 * Asks {@code factory} for the container of {@code endpoint} and keeps it; called for
	 * every listener once all singletons exist, before the registry starts.
	 * @throws IllegalStateException when the endpoint's queue already has a container
	 */
	public void registerListenerContainer(RdmaListenerEndpoint endpoint, RdmaListenerContainerFactory factory) {
		registerListenerContainer(endpoint, factory, false);
	}

	/**
	 * Asks {@code factory} for the container of {@code endpoint} and keeps it; with
	 * {@code startImmediately}, starts it when the registry is running already (a
	 * listener of a bean created after startup).
	 * @throws IllegalStateException when the endpoint's queue already has a container
	 */
	public synchronized void registerListenerContainer(RdmaListenerEndpoint endpoint,
			RdmaListenerContainerFactory factory, boolean startImmediately) {
		if (containers.containsKey(endpoint.queue())) {
			throw new IllegalStateException("queue '" + endpoint.queue() + "' already has a listener container: "
					+ containers.get(endpoint.queue()));
		}
		CompletionQueueListenerContainer container = factory.createListenerContainer(endpoint);
		if (beanFactory instanceof ConfigurableBeanFactory configurable) {
			configurable.registerDependentBean(endpoint.queue(), BEAN_NAME);
		}
		if (startImmediately && running) {
			container.start();
		}
		containers.put(endpoint.queue(), container);
	}

	/** The container of a queue, or null. */
	public synchronized @Nullable CompletionQueueListenerContainer getListenerContainer(String queue) {
		return containers.get(queue);
	}

	/** Every container, in registration order. */
	public synchronized List<CompletionQueueListenerContainer> getListenerContainers() {
		return new ArrayList<>(containers.values());
	}

	@Override
	public synchronized void start() {
		if (running) {
			return;
		}
		Lifecycles.startAll(containers.values(), CompletionQueueListenerContainer::start, this::stop);
		running = true;
	}

	@Override
	public synchronized void stop() {
		if (!running) {
			return;
		}
		running = false;
		stop(new ArrayList<>(containers.values()));
	}

	private void stop(List<CompletionQueueListenerContainer> list) {
		list.forEach(CompletionQueueListenerContainer::signalStop);
		long deadline = Deadlines.after(shutdownTimeout);
		for (CompletionQueueListenerContainer container : list) {
			if (container.isPolledByCurrentThread()) {
				// stopped by its own listener (e.g. closing the context): it cannot stop
				// before the listener returns, and then finishes the stop itself
				logger.debug("Poller of queue '" + container.queue() + "' is the current thread: it stops once the "
						+ "listener returns");
				continue;
			}
			if (!container.awaitStop(deadline)) {
				logger.warn("Poller of queue '" + container.queue() + "' did not stop within the shutdown timeout ("
						+ shutdownTimeout + "); shutdown proceeds (closing the queue acks its events)");
			}
		}
	}

	@Override
	public boolean isRunning() {
		return running;
	}

	@Override
	public int getPhase() {
		return Integer.MAX_VALUE - 100;
	}

	@Override
	public void destroy() {
		stop();
		long now = System.nanoTime();
		getListenerContainers().forEach(c -> c.awaitStop(now)); // frees the wakers of
																// containers that never
																// started
	}

}
