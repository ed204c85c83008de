/**
 * {@link dev.rdma.spring.annotation.RdmaCompletionListener @RdmaCompletionListener}, what
 * an application puts on a bean method to receive the completions of a queue, and the
 * bean post-processor that finds such methods and turns each into an endpoint.
 */
@NullMarked
package dev.rdma.spring.annotation;

import org.jspecify.annotations.NullMarked;
