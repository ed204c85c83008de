package dev.rdma.spring.boot.autoconfigure.metrics;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.ToDoubleFunction;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent;
import dev.rdma.spring.connection.support.ConfiguredConnection;
import dev.rdma.spring.connection.support.ConnectionCounters;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;

/**
 * Meters of each connection under {@code rdma.connections}, tagged
 * {@code connection=<name>}: messages and bytes sent (acknowledged) and received, bytes
 * written and read by one-sided operations, send-queue full, send errors, listener
 * errors, reconnects, connection errors by kind (rdma_cm event type, TIMEOUT, a failed
 * completion's status, ...: every kind counted, registered when first counted), and a
 * gauge {@code rdma.connection.established} (1 when established, a server: its peers).
 * They read the connection's counters when scraped; nothing is recorded per message.
 */
public class RdmaConnectionMetrics implements SmartInitializingSingleton {

	/**
	 * The kinds of connection error that get a counter from the start; any other kind
	 * (EXCHANGE, IO_ERROR, CLOSED, STOPPED, a failed completion's status such as
	 * RETRY_EXC_ERR, ...) gets one when it is first counted.
	 */
	static final List<String> ERROR_KINDS = List.of("ADDR_ERROR", "ROUTE_ERROR", "UNREACHABLE", "REJECTED",
			"CONNECT_ERROR", "DISCONNECTED", "DEVICE_REMOVAL", "TIMEOUT", "DEVICE_MISMATCH", "MAX_PEERS", "VERB_ERROR",
			"ERROR");

	/** The tags of {@code rdma.connection.rejected}, registered for every server. */
	static final List<RdmaPeerRefusedEvent.Reason> REJECT_REASONS = List.of(RdmaPeerRefusedEvent.Reason.NOT_ALLOWED,
			RdmaPeerRefusedEvent.Reason.FILTERED, RdmaPeerRefusedEvent.Reason.MALFORMED,
			RdmaPeerRefusedEvent.Reason.MAX_PEERS);

	private final ObjectProvider<MeterRegistry> meterRegistry;

	private final RdmaConnectionRegistry registry;

	public RdmaConnectionMetrics(ObjectProvider<MeterRegistry> meterRegistry, RdmaConnectionRegistry registry) {
		this.meterRegistry = meterRegistry;
		this.registry = registry;
	}

	/**
	 * Registers the meters once every connection exists (as the pollers' meters do);
	 * nothing without a unique {@link MeterRegistry}.
	 */
	@Override
	public void afterSingletonsInstantiated() {
		MeterRegistry meters = meterRegistry.getIfUnique();
		if (meters == null) {
			return;
		}
		for (ConfiguredConnection c : registry.connections()) {
			ConnectionCounters n = c.counters();
			String name = c.name();
			counter(meters, "rdma.connection.messages.sent", name, n, ConnectionCounters::messagesSent,
					"Messages whose send completed with success");
			counter(meters, "rdma.connection.bytes.sent", name, n, ConnectionCounters::bytesSent,
					"Bytes of the messages sent");
			counter(meters, "rdma.connection.messages.received", name, n, ConnectionCounters::messagesReceived,
					"Messages received");
			counter(meters, "rdma.connection.bytes.received", name, n, ConnectionCounters::bytesReceived,
					"Bytes received");
			counter(meters, "rdma.connection.bytes.written", name, n, ConnectionCounters::bytesWritten,
					"Bytes of the RDMA WRITEs into the peer's region that completed with success");
			counter(meters, "rdma.connection.bytes.read", name, n, ConnectionCounters::bytesRead,
					"Bytes of the RDMA READs from the peer's region that completed with success");
			counter(meters, "rdma.connection.send.queue.full", name, n, ConnectionCounters::sendQueueFull,
					"Sends that found every send buffer in flight");
			counter(meters, "rdma.connection.send.errors", name, n, ConnectionCounters::sendErrors,
					"Sends, RDMA WRITEs and READs whose completion failed");
			counter(meters, "rdma.connection.sends.posted", name, n, ConnectionCounters::sendsPosted,
					"Work requests posted on the send queue");
			counter(meters, "rdma.connection.send.posts", name, n, ConnectionCounters::sendPosts,
					"Calls of ibv_post_send (doorbells); fewer than sends.posted when sends shared a post");
			counter(meters, "rdma.connection.sends.refused", name, n, ConnectionCounters::sendsRefused,
					"Sends and RDMA operations the provider refused to post");
			counter(meters, "rdma.connection.listener.errors", name, n, ConnectionCounters::listenerErrors,
					"Message listener calls that threw");
			counter(meters, "rdma.connection.reconnects", name, n, ConnectionCounters::reconnects,
					"Connections established after the first");
			Set<String> registered = ConcurrentHashMap.newKeySet();
			for (String kind : ERROR_KINDS) {
				errors(meters, name, n, kind, registered);
			}
			n.onErrorKind((kind) -> errors(meters, name, n, kind, registered));
			if (c.isServer()) {
				for (RdmaPeerRefusedEvent.Reason reason : REJECT_REASONS) {
					FunctionCounter.builder("rdma.connection.rejected", n, x -> x.rejected(reason))
						.tag("connection", name)
						.tag("reason", reason.name())
						.description("Peers a server refused: address not allowed, filtered, malformed private data,"
								+ " max-peers connected")
						.register(meters);
				}
			}
			Gauge.builder("rdma.connection.established", c, RdmaConnectionMetrics::established)
				.tag("connection", name)
				.description("1 when the connection is established; a server: its connected peers")
				.register(meters);
		}
	}

	/**
	 * The counter of one kind, registered once per connection: a fixed kind counted for
	 * the first time is not registered again (Micrometer would warn that the function
	 * counter exists and ignore the second function).
	 */
	private static void errors(MeterRegistry meters, String connection, ConnectionCounters counters, String kind,
			Set<String> registered) {
		if (!registered.add(kind)) {
			return;
		}
		FunctionCounter.builder("rdma.connection.errors", counters, x -> x.connectionErrors(kind))
			.tag("connection", connection)
			.tag("kind", kind)
			.description("Failed connection attempts and ended connections, by rdma_cm event, status or cause")
			.register(meters);
	}

	private static double established(ConfiguredConnection c) {
		if (c.isServer()) {
			return c.peers().size();
		}
		return c.state() == ConnectionState.ESTABLISHED ? 1 : 0;
	}

	private static void counter(MeterRegistry meters, String meter, String connection, ConnectionCounters counters,
			ToDoubleFunction<ConnectionCounters> value, String description) {
		FunctionCounter.builder(meter, counters, value)
			.tag("connection", connection)
			.description(description)
			.register(meters);
	}

}
