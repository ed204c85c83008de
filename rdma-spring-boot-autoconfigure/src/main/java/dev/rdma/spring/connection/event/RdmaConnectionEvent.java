package dev.rdma.spring.connection.event;

import java.io.Serial;

import org.springframework.context.ApplicationEvent;

import dev.rdma.spring.connection.RdmaConnection;

/**
 * A change in the life of a connection under {@code rdma.connections}, published through
 * the application context's {@code ApplicationEventPublisher}; listen with
 * {@code @EventListener} for this type (every event) or one of its subclasses.
 *
 * <p>
 * <b>Thread.</b> Published synchronously by the connection's own thread,
 * {@code rdma-connect-<name>} for a client and {@code rdma-accept-<name>} for a server,
 * never by a poller thread: a listener may send on the connection (its send completions
 * are polled meanwhile), call {@link RdmaConnection#disconnect()}, or hand work to
 * another thread. It must not block for long: while it runs, a client does not reconnect
 * and a server neither accepts peers nor notices their end. Stopping the connections or
 * closing the context belongs on another thread (the stop waits for this one). An
 * exception a listener throws is logged and otherwise ignored. Nothing is published per
 * message.
 *
 * <p>
 * The source is the connection's bean (for a server, the bean that stands for all its
 * peers); an event is immutable and may be kept.
 */
public abstract class RdmaConnectionEvent extends ApplicationEvent {

	@Serial
	private static final long serialVersionUID = 1L;

	/** An event of {@code connection}, the bean of {@code rdma.connections.<name>}. */
	protected RdmaConnectionEvent(RdmaConnection connection) {
		super(connection);
	}

	/** The connection's bean: a client's connection, or the server's. */
	public RdmaConnection getConnection() {
		return (RdmaConnection) getSource();
	}

	/** The key under {@code rdma.connections} (the bean's name). */
	public String getConnectionName() {
		return getConnection().name();
	}

	/**
	 * The event's class and connection name, followed by what the event adds, such as
	 * {@code RdmaConnectionGaveUpEvent[orders after 5 attempts]}.
	 */
	@Override
	public String toString() {
		return getClass().getSimpleName() + "[" + getConnectionName() + describe() + "]";
	}

	/** What {@link #toString()} writes after the connection's name; empty here. */
	String describe() {
		return "";
	}

}
