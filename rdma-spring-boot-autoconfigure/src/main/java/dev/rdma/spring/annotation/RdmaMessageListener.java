package dev.rdma.spring.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a bean method that receives the messages of a connection configured under
 * {@code rdma.connections}, on the poller thread of the connection's receive queue, in
 * the order they arrived (per peer).
 *
 * <pre>
 * &#64;RdmaMessageListener(connection = "orders")
 * void onMessage(RdmaMessage message) {
 *     long id = message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
 *     message.connection().send(reply); // to the peer it came from
 * }
 * </pre>
 *
 * The {@link dev.rdma.spring.connection.RdmaMessage} is a view of the receive buffer,
 * valid during the call: the buffer is posted again when the method returns, unless it
 * called {@code retain()} (then on {@code release()}). A listener that throws is counted
 * and logged; the buffer is posted again and receiving goes on. One listener per
 * connection; a connection without one counts and drops what it receives.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RdmaMessageListener {

	/** Key of the connection under {@code rdma.connections}. */
	String connection();

}
