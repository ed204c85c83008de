package dev.rdma.spring.connection.support;

import dev.rdma.spring.listener.ListenerInvoker;

/**
 * The {@code @RdmaMessageListener} method of a connection, bound to its bean.
 *
 * @param id how messages name the listener
 * @param invoker the bound method, called with the {@link ReceivedMessage}
 */
public record MessageListenerBinding(String id, ListenerInvoker invoker) {
}
