package dev.rdma.spring.boot.autoconfigure.listener;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.NoSuchBeanDefinitionException;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableBeanFactory;
import org.springframework.context.SmartLifecycle;

import dev.rdma.spring.boot.autoconfigure.RdmaConfigurationException;
import dev.rdma.spring.boot.autoconfigure.RdmaProperties;
import dev.rdma.spring.boot.autoconfigure.RdmaPropertiesValidator;
import dev.rdma.verbs.CompletionQueue;

/**
 * Owns one {@link CompletionQueuePoller} per queue with a listener and runs them as a {@link SmartLifecycle}: they
 * start last and stop first. The registry is registered as a dependant of every queue it polls, so the container
 * destroys it (stopping any poller still running) before it closes those queues.
 */
public class RdmaListenerEndpointRegistry implements SmartLifecycle, DisposableBean, BeanFactoryAware {

    /** Bean name of the registry. */
    public static final String BEAN_NAME = "rdmaListenerEndpointRegistry";

    private static final Log logger = LogFactory.getLog(RdmaListenerEndpointRegistry.class);

    private final RdmaProperties properties;
    private final ObjectProvider<PollerMetrics.Factory> metrics;
    private final Map<String, CompletionQueuePoller> pollers = new LinkedHashMap<>();
    private final Map<CompletionQueue, CompletionQueuePoller> byQueue = new IdentityHashMap<>();
    private BeanFactory beanFactory;
    private volatile boolean running;

    public RdmaListenerEndpointRegistry(RdmaProperties properties, ObjectProvider<PollerMetrics.Factory> metrics) {
        this.properties = properties;
        this.metrics = metrics;
    }

    @Override
    public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
        this.beanFactory = beanFactory;
    }

    /** Creates the pollers of {@code endpoints}; called once all singletons exist. */
    public synchronized void initialize(List<RdmaListenerEndpoint> endpoints) {
        PollerMetrics.Factory factory = metrics.getIfAvailable(() -> PollerMetrics.Factory.NONE);
        for (RdmaListenerEndpoint endpoint : endpoints) {
            RdmaCompletionErrorHandler errorHandler = null;
            if (endpoint.errorHandler() != null) {
                try {
                    errorHandler = beanFactory.getBean(endpoint.errorHandler(), RdmaCompletionErrorHandler.class);
                }
                catch (BeansException ex) {
                    throw new RdmaConfigurationException(endpoint.id(), endpoint.id() + " names errorHandler '"
                            + endpoint.errorHandler() + "', which is not a RdmaCompletionErrorHandler bean",
                            "Define a bean named '" + endpoint.errorHandler()
                                    + "' implementing RdmaCompletionErrorHandler, or remove errorHandler.", ex);
                }
            }
            CompletionQueue queue;
            try {
                queue = beanFactory.getBean(endpoint.queue(), CompletionQueue.class);
            }
            catch (NoSuchBeanDefinitionException ex) {
                throw new RdmaConfigurationException(endpoint.id(), endpoint.id() + " listens to queue '"
                        + endpoint.queue() + "', but no completion queue bean of that name exists",
                        "Check that RDMA auto-configuration is active (rdma.required=true shows why it is not).", ex);
            }
            if (beanFactory instanceof ConfigurableBeanFactory configurable) {
                configurable.registerDependentBean(endpoint.queue(), BEAN_NAME);
            }
            RdmaProperties.CompletionQueue config = properties.getCompletionQueues().get(endpoint.queue());
            CompletionQueuePoller poller = new CompletionQueuePoller(endpoint.queue(), queue,
                    RdmaPropertiesValidator.effectiveMode(config), config.getPolling().getBatchSize(),
                    config.getPolling().getSpin().toNanos(), config.getAckBatch(), endpoint, errorHandler,
                    factory.forQueue(endpoint.queue()), byQueue::get);
            pollers.put(endpoint.queue(), poller);
            byQueue.put(queue, poller);
        }
    }

    /** The poller of a queue, or null. */
    public synchronized CompletionQueuePoller poller(String queue) {
        return pollers.get(queue);
    }

    public synchronized List<CompletionQueuePoller> pollers() {
        return new ArrayList<>(pollers.values());
    }

    @Override
    public synchronized void start() {
        if (running) {
            return;
        }
        pollers.values().forEach(CompletionQueuePoller::start);
        running = true;
    }

    @Override
    public synchronized void stop() {
        if (!running) {
            return;
        }
        running = false;
        pollers.values().forEach(CompletionQueuePoller::signalStop);
        long deadline = System.nanoTime() + properties.getShutdownTimeout().toNanos();
        for (CompletionQueuePoller poller : pollers.values()) {
            if (!poller.awaitStop(deadline)) {
                logger.warn("Poller of queue '" + poller.queue() + "' did not stop within rdma.shutdown-timeout="
                        + properties.getShutdownTimeout() + "; shutdown proceeds (closing the queue acks its events)");
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
        pollers().forEach(p -> p.awaitStop(now)); // frees the wakers of pollers that never started
    }
}
