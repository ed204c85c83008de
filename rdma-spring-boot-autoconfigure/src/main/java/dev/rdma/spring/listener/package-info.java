/**
 * The runtime of a listener: a
 * {@link dev.rdma.spring.listener.CompletionQueueListenerContainer container} runs the
 * listener of one completion queue on a dedicated poller thread ({@code PollLoop}) or on
 * a thread of a {@link dev.rdma.spring.listener.PollerGroup poller group}
 * ({@code GroupPollLoop}: many queues, one {@code epoll_wait}); the poll loop drains,
 * arms, waits on the completion channel(s) and acks events; the queue's dispatcher calls
 * the listener (or the {@link dev.rdma.spring.listener.RdmaCompletionErrorHandler error
 * handler}) and counts each batch for the {@link dev.rdma.spring.listener.PollerMetrics
 * metrics}.
 *
 * <p>
 * The way of a completion: {@code PollLoop.drain} polls the CQ ({@code ibv_poll_cq} or
 * the extended iterator) into the loop's {@code WorkCompletionBuffer}; for a
 * single-completion listener the binding calls {@code CompletionDispatcher.onCompletion}
 * for each completion during the poll, which counts its status and invokes the bound
 * method through a {@link dev.rdma.spring.listener.ListenerInvoker} (or the error handler
 * for a failed one); for a batch listener the dispatcher counts the batch and invokes the
 * method once with the buffer. After the batch the dispatcher reports it to the metrics
 * once. Nothing is allocated per completion.
 */
@NullMarked
package dev.rdma.spring.listener;

import org.jspecify.annotations.NullMarked;
