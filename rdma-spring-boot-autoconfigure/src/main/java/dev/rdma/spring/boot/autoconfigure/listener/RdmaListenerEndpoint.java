package dev.rdma.spring.boot.autoconfigure.listener;

import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * A discovered {@link RdmaCompletionListener} method, validated and bound.
 *
 * @param id how messages name the listener: {@code bean 'x' method onRx(WorkCompletion)}
 * @param beanName the bean's name
 * @param method the annotated method
 * @param queue the queue key
 * @param batch whether it takes a {@code CompletionBatch}
 * @param errorHandler the name of the error handler bean, or null
 * @param invoker the bound method
 */
public record RdmaListenerEndpoint(String id, String beanName, Method method, String queue, boolean batch,
        String errorHandler, ListenerInvoker invoker) {

    static String describe(String beanName, Method method) {
        return "@RdmaCompletionListener " + method.getDeclaringClass().getSimpleName() + "." + method.getName() + "("
                + Arrays.stream(method.getParameterTypes()).map(Class::getSimpleName).collect(Collectors.joining(", "))
                + ") of bean '" + beanName + "'";
    }
}
