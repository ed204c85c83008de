package dev.rdma.spring.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import dev.rdma.spring.listener.RdmaCompletionErrorHandler;
import dev.rdma.verbs.WcExFlag;

/**
 * Marks a bean method that receives the completions of a configured completion queue, in
 * CQ order, on the queue's poller thread: its own ({@code rdma-poller-<queue>}) with a
 * dedicated poller, or a thread of its poller group ({@code rdma-poller-<group>-<n>}),
 * which it shares with the group's other queues on that thread (by default the queues of
 * one channel). A listener that blocks holds up those queues too; calls for one queue
 * never overlap.
 *
 * <pre>
 * &#64;RdmaCompletionListener(queue = "rx")
 * void onCompletion(WorkCompletion wc) { ... }
 *
 * &#64;RdmaCompletionListener(queue = "tx", batch = true)
 * void onBatch(CompletionBatch batch) { ... }
 * </pre>
 *
 * The completion (or batch) is a view valid only during the call; {@code copy()} what
 * must be kept. Completions with a status other than success reach a single-completion
 * listener too, unless {@link #errorHandler()} names a {@link RdmaCompletionErrorHandler}
 * bean. A batch listener always gets the whole batch, failed completions included (check
 * each status); an error handler, if named, is called first for each failed completion of
 * the batch. A listener that throws is counted and logged; polling goes on.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RdmaCompletionListener {

	/** Key of the completion queue under {@code rdma.completion-queues}. */
	String queue();

	/**
	 * True for a method taking a {@code CompletionBatch} (one call per poll), false for a
	 * {@code WorkCompletion}.
	 */
	boolean batch() default false;

	/**
	 * Name of a {@link RdmaCompletionErrorHandler} bean that receives failed completions:
	 * instead of a single-completion listener; before a batch listener, which still gets
	 * them in its batch. Empty = none.
	 */
	String errorHandler() default "";

	/**
	 * The extended completion fields the method reads. Startup fails when the queue does
	 * not provide one of them (its {@code wc-flags}; a legacy queue provides the standard
	 * fields).
	 */
	WcExFlag[] fields() default {};

}
