package dev.rdma.spring.boot.autoconfigure.listener;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.AnnotationUtils;
import org.springframework.core.env.Environment;

import dev.rdma.spring.boot.autoconfigure.RdmaConfigurationException;
import dev.rdma.spring.boot.autoconfigure.RdmaProperties;
import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletion;

/**
 * Finds {@link RdmaCompletionListener} methods on every bean (through AOP proxies), validates them against the
 * configured queues, binds each to a {@link ListenerInvoker} and, once all singletons exist, hands them to the
 * {@link RdmaListenerEndpointRegistry}.
 */
public class RdmaCompletionListenerAnnotationBeanPostProcessor
        implements BeanPostProcessor, SmartInitializingSingleton, BeanFactoryAware, EnvironmentAware, Ordered {

    /** Bean name of this post-processor. */
    public static final String BEAN_NAME = "rdmaCompletionListenerAnnotationBeanPostProcessor";

    private final Set<Class<?>> nonAnnotatedClasses = ConcurrentHashMap.newKeySet();
    private final Map<String, RdmaListenerEndpoint> endpointsByQueue = new LinkedHashMap<>();
    private BeanFactory beanFactory;
    private Environment environment;
    private RdmaProperties properties;

    @Override
    public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
        this.beanFactory = beanFactory;
    }

    @Override
    public void setEnvironment(Environment environment) {
        this.environment = environment;
    }

    @Override
    public int getOrder() {
        return LOWEST_PRECEDENCE;
    }

    private RdmaProperties properties() {
        if (properties == null) {
            properties = Binder.get(environment).bind(RdmaProperties.PREFIX, RdmaProperties.class)
                    .orElseGet(RdmaProperties::new);
        }
        return properties;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
        Class<?> targetClass = AopUtils.getTargetClass(bean);
        if (nonAnnotatedClasses.contains(targetClass)
                || !AnnotationUtils.isCandidateClass(targetClass, RdmaCompletionListener.class)) {
            return bean;
        }
        Map<Method, RdmaCompletionListener> methods = MethodIntrospector.selectMethods(targetClass,
                (MethodIntrospector.MetadataLookup<RdmaCompletionListener>) m -> AnnotatedElementUtils
                        .findMergedAnnotation(m, RdmaCompletionListener.class));
        if (methods.isEmpty()) {
            nonAnnotatedClasses.add(targetClass);
            return bean;
        }
        methods.forEach((method, annotation) -> register(bean, beanName, method, annotation));
        return bean;
    }

    private synchronized void register(Object bean, String beanName, Method method, RdmaCompletionListener annotation) {
        String id = RdmaListenerEndpoint.describe(beanName, method);
        String queue = annotation.queue();
        Map<String, RdmaProperties.CompletionQueue> queues = properties().getCompletionQueues();
        if (Modifier.isStatic(method.getModifiers())) {
            throw error(id, id + " is static", "Make the listener method an instance method.");
        }
        if (queue == null || queue.isBlank() || !queues.containsKey(queue)) {
            throw error(id, id + " listens to queue '" + queue + "', which is not configured under "
                    + "rdma.completion-queues (configured: " + queues.keySet() + ")",
                    "Set queue to one of " + queues.keySet() + " or add rdma.completion-queues." + queue + ".");
        }
        Class<?>[] parameters = method.getParameterTypes();
        if (parameters.length != 1) {
            throw error(id, id + " has " + parameters.length + " parameters; a listener takes exactly one: "
                    + (annotation.batch() ? "CompletionBatch" : "WorkCompletion"),
                    "Declare the method as void " + method.getName() + "("
                            + (annotation.batch() ? "CompletionBatch batch" : "WorkCompletion completion") + ").");
        }
        Class<?> parameter = parameters[0];
        boolean takesBatch = parameter != Object.class && parameter.isAssignableFrom(CompletionBatch.class);
        boolean takesSingle = parameter != Object.class && parameter.isAssignableFrom(WorkCompletion.class);
        if (annotation.batch() && !takesBatch) {
            throw error(id, id + " is declared batch = true but its parameter is " + parameter.getSimpleName()
                    + ", not CompletionBatch", takesSingle ? "Remove batch = true, or take a CompletionBatch."
                            : "Take a CompletionBatch parameter.");
        }
        if (!annotation.batch() && !takesSingle) {
            throw error(id, id + " takes a " + parameter.getSimpleName() + (takesBatch
                    ? " but is not declared batch = true" : ", which a completion listener cannot supply"),
                    takesBatch ? "Add batch = true to the annotation." : "Take a WorkCompletion (or, with batch = true, a CompletionBatch).");
        }
        RdmaProperties.CompletionQueue config = queues.get(queue);
        long provided = RdmaResources.providedWcFlags(config);
        for (WcExFlag field : annotation.fields()) {
            if ((provided & field.bit()) == 0) {
                String path = "rdma.completion-queues." + queue + ".wc-flags";
                throw error(id, id + " reads field " + field.name().toLowerCase(Locale.ROOT).replace('_', '-')
                        + ", but queue '" + queue + "' (type " + config.getType().name().toLowerCase(Locale.ROOT)
                        + ") does not provide it (" + path + "=" + config.getWcFlags() + ")",
                        config.getType() == RdmaProperties.QueueType.LEGACY
                                ? "Make queue '" + queue + "' an extended queue with that field in " + path + "."
                                : "Add " + field.name().toLowerCase(Locale.ROOT).replace('_', '-') + " to " + path + ".");
            }
        }
        RdmaListenerEndpoint previous = endpointsByQueue.get(queue);
        if (previous != null) {
            throw error(id, "queue '" + queue + "' has two listeners: " + previous.id() + " and " + id
                    + "; a queue is drained by exactly one listener", "Remove one of the listeners, or configure a second queue.");
        }
        String errorHandler = annotation.errorHandler().isBlank() ? null : annotation.errorHandler();
        Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
        ListenerInvoker invoker = ListenerInvoker.bind(bean, invocable);
        endpointsByQueue.put(queue, new RdmaListenerEndpoint(id, beanName, method, queue, annotation.batch(),
                errorHandler, invoker));
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
        RdmaListenerEndpointRegistry registry = beanFactory.getBean(RdmaListenerEndpointRegistry.BEAN_NAME,
                RdmaListenerEndpointRegistry.class);
        registry.initialize(endpoints());
    }
}
