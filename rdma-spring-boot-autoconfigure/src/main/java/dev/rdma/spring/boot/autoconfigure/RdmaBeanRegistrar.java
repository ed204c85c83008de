package dev.rdma.spring.boot.autoconfigure;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.DestructionAwareBeanPostProcessor;
import org.springframework.beans.factory.support.AbstractBeanDefinition;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.support.ConnectionSettings;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.spring.listener.PollerThreads;
import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.efa.EfaCompletionQueue;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.NativeObject;

/**
 * Binds {@link RdmaProperties} (needed before any bean exists: each key becomes a bean
 * name), validates them (nothing native is touched when they are wrong) and registers one
 * bean per device ({@link Context}), channel ({@link CompletionChannel}), completion
 * queue ({@link CompletionQueue}) and connection ({@link RdmaConnection}, made by the
 * {@link RdmaConnectionRegistry}), named after its key. Each channel and queue depends on
 * its device (and a queue on its channel), so the container closes queues before channels
 * before contexts, and a user bean that uses a queue before the queue.
 *
 * <p>
 * These native beans are closed by {@link NativeBeanCloser} rather than by a destroy
 * method: when the context is closed on a poller thread (by a listener), their close is
 * handed to that thread for when its poll has returned ({@link PollerThreads}), since a
 * queue cannot be destroyed from inside its own poll.
 */
class RdmaBeanRegistrar extends RdmaRegistrarSupport {

	static final String MONITOR_BEAN_NAME = "rdmaAsyncEventMonitor";

	static final String REPORT_BEAN_NAME = "rdmaStartupReport";

	/**
	 * Beans that the starter's later auto-configurations define (health:
	 * {@code rdmaHealthIndicator}, metrics: {@code rdmaPollerMetrics}). They are
	 * registered after this registrar runs, so a device, channel or queue key equal to
	 * one of them is refused here as if the bean already existed (as it did when health
	 * and metrics were nested in {@link RdmaAutoConfiguration}). Spelled out: this
	 * package does not depend on theirs.
	 */
	static final Set<String> LATER_BEAN_NAMES = Set.of("rdmaHealthIndicator", "rdmaPollerMetrics",
			"rdmaConnectionMetrics", "rdmaMemoryMetrics");

	static RdmaProperties bind(Environment environment) {
		return Binder.get(environment).bind(RdmaProperties.PREFIX, RdmaProperties.class).orElseGet(RdmaProperties::new);
	}

	/** Bean name of the {@link NativeBeanCloser}. */
	static final String CLOSER_BEAN_NAME = "dev.rdma.spring.boot.autoconfigure.internalNativeBeanCloser";

	@Override
	public void registerBeanDefinitions(AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
		RdmaProperties properties = bind(environment());
		RdmaPropertiesValidator.validate(properties,
				name -> registry.containsBeanDefinition(name) || LATER_BEAN_NAMES.contains(name));
		if (properties.isRequired()) {
			String problem = OnRdmaAvailableCondition.problem();
			if (problem != null) {
				throw new RdmaConfigurationException("rdma.required", "rdma.required=true but " + problem,
						"Install libibverbs1 and ibverbs-providers and load an RDMA driver (e.g. Soft-RoCE: "
								+ "rdma link add rxe0 type rxe netdev eth0), or set rdma.required=false to start without RDMA.");
			}
		}
		BeanFactory factory = beanFactory();
		// The registrar's own binding serves registration only (bean names come from the
		// keys, before any bean
		// exists); at run time everything reads the one RdmaProperties bean, resources
		// included.
		Set<String> closed = Set.copyOf(nativeBeanNames(properties));
		RootBeanDefinition closer = new RootBeanDefinition(NativeBeanCloser.class, () -> new NativeBeanCloser(closed));
		closer.setRole(BeanDefinition.ROLE_INFRASTRUCTURE);
		registry.registerBeanDefinition(CLOSER_BEAN_NAME, closer);
		RootBeanDefinition resources = new RootBeanDefinition(RdmaResources.class,
				() -> new RdmaResources(factory.getBean(RdmaProperties.class), factory));
		registry.registerBeanDefinition(RdmaResources.BEAN_NAME, resources);

		List<String> deviceKeys = new ArrayList<>(properties.getDevices().keySet());
		for (String key : deviceKeys) {
			register(registry, key, Context.class, () -> resources(factory).openDevice(key));
		}
		properties.getChannels().forEach((key, channel) -> {
			String device = RdmaPropertiesValidator.resolveDevice(properties, RdmaPropertiesValidator.CHANNELS + key,
					channel.getDevice());
			register(registry, key, CompletionChannel.class, () -> resources(factory).createChannel(key), device);
		});
		properties.getCompletionQueues().forEach((key, queue) -> {
			String device = RdmaPropertiesValidator.resolveDevice(properties, RdmaPropertiesValidator.QUEUES + key,
					queue.getDevice());
			Class<? extends CompletionQueue> type = queue.getType() == QueueType.EFA ? EfaCompletionQueue.class
					: queue.getType() == QueueType.EXTENDED ? ExtendedCompletionQueue.class : CompletionQueue.class;
			String[] dependsOn = queue.getChannel() == null ? new String[] { device }
					: new String[] { device, queue.getChannel() };
			register(registry, key, type, () -> resources(factory).createQueue(key), dependsOn);
		});

		// connections: the registry (a SmartLifecycle after the pollers) and one
		// RdmaConnection bean per key, made by the registry
		List<ConnectionSettings> connections = RdmaConnectionProperties.settings(properties);
		RootBeanDefinition connectionRegistry = new RootBeanDefinition(RdmaConnectionRegistry.class,
				() -> new RdmaConnectionRegistry(connections, properties.getShutdownTimeout())
					.allowedPeers(RdmaConnectionProperties.allowedPeers(properties)));
		registry.registerBeanDefinition(RdmaConnectionRegistry.BEAN_NAME, connectionRegistry);
		for (ConnectionSettings connection : connections) {
			RootBeanDefinition definition = new RootBeanDefinition(RdmaConnection.class);
			definition.setInstanceSupplier(
					() -> factory.getBean(RdmaConnectionRegistry.BEAN_NAME, RdmaConnectionRegistry.class)
						.connection(connection.name()));
			definition.setTargetType(RdmaConnection.class);
			definition.setDependsOn(connection.sendQueue(), connection.receiveQueue(),
					RdmaConnectionRegistry.BEAN_NAME);
			registry.registerBeanDefinition(connection.name(), definition);
		}

		RootBeanDefinition report = new RootBeanDefinition(RdmaStartupReport.class,
				() -> new RdmaStartupReport(resources(factory),
						factory.getBeanProvider(RdmaListenerEndpointRegistry.class)));
		registry.registerBeanDefinition(REPORT_BEAN_NAME, report);

		RootBeanDefinition monitor = new RootBeanDefinition(RdmaAsyncEventMonitor.class,
				() -> new RdmaAsyncEventMonitor(resources(factory), deviceKeys));
		monitor.setDependsOn(deviceKeys.toArray(String[]::new));
		// eager even under spring.main.lazy-initialization=true: nothing injects
		// it, and a lazy monitor would read no async event (CQ overrun, port down)
		monitor.setLazyInit(false);
		registry.registerBeanDefinition(MONITOR_BEAN_NAME, monitor);
	}

	private static RdmaResources resources(BeanFactory factory) {
		return factory.getBean(RdmaResources.BEAN_NAME, RdmaResources.class);
	}

	private static Set<String> nativeBeanNames(RdmaProperties properties) {
		Set<String> names = new HashSet<>(properties.getDevices().keySet());
		names.addAll(properties.getChannels().keySet());
		names.addAll(properties.getCompletionQueues().keySet());
		return names;
	}

	private static void register(BeanDefinitionRegistry registry, String name, Class<?> type,
			java.util.function.Supplier<?> supplier, String... dependsOn) {
		RootBeanDefinition definition = new RootBeanDefinition(type);
		definition.setInstanceSupplier(supplier);
		definition.setTargetType(type);
		// no destroy method (nor an inferred close()): NativeBeanCloser closes it (on a
		// poller thread, once the poll has returned)
		definition.setDestroyMethodName("");
		definition.setRole(AbstractBeanDefinition.ROLE_APPLICATION);
		if (dependsOn.length > 0) {
			definition.setDependsOn(dependsOn);
		}
		registry.registerBeanDefinition(name, definition);
	}

	/**
	 * Closes the device, channel and queue beans when the container destroys them; on a
	 * poller thread (the context closed by a listener) hands the close to that thread for
	 * when its poll has returned ({@link PollerThreads#closeWhenPollEnds}): the binding
	 * refuses to destroy a queue from inside its own poll, and the channel and device
	 * could not be closed before it.
	 */
	static final class NativeBeanCloser implements DestructionAwareBeanPostProcessor {

		private final Set<String> names;

		NativeBeanCloser(Set<String> names) {
			this.names = names;
		}

		@Override
		public void postProcessBeforeDestruction(Object bean, String beanName) {
			if (bean instanceof NativeObject nativeObject && names.contains(beanName)
					&& !PollerThreads.closeWhenPollEnds(nativeObject)) {
				nativeObject.close();
			}
		}

		@Override
		public boolean requiresDestruction(Object bean) {
			return bean instanceof NativeObject;
		}

	}

}
