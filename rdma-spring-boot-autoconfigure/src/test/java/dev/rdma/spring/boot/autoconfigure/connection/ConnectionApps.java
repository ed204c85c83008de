package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.event.EventListener;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.ContextSelfCloser;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthAutoConfiguration;
import dev.rdma.spring.boot.autoconfigure.metrics.RdmaMetricsAutoConfiguration;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.event.RdmaConnectionEvent;
import dev.rdma.spring.connection.event.RdmaConnectionGaveUpEvent;
import dev.rdma.verbs.testing.TwoDevices;

/**
 * The two applications of the connection device tests, configured through properties
 * only: an echo server on one device and a client on the other. A message is a
 * {@code long} sequence number followed by a pattern derived from it.
 */
final class ConnectionApps {

	static final String NAME = "link";

	private ConnectionApps() {
	}

	/** The properties of one side: device, channel, two queues, the connection. */
	static List<String> properties(TwoDevices.Peer peer, String connection) {
		List<String> p = new ArrayList<>(List.of("spring.main.banner-mode=off", "rdma.required=true",
				"rdma.shutdown-timeout=10s", "rdma.devices.nic.name=" + peer.device(), "rdma.channels.ev.device=nic",
				"rdma.completion-queues.tx.channel=ev", "rdma.completion-queues.tx.entries=512",
				"rdma.completion-queues.rx.channel=ev", "rdma.completion-queues.rx.entries=512",
				"rdma.connections." + NAME + ".send-queue=tx", "rdma.connections." + NAME + ".receive-queue=rx",
				"rdma.connections." + NAME + ".message-size=1024",
				"rdma.connections." + NAME + ".retry.initial-interval=50ms",
				"rdma.connections." + NAME + ".retry.max-interval=500ms",
				"rdma.connections." + NAME + ".connect-timeout=10s"));
		p.add("rdma.connections." + NAME + "." + connection);
		return p;
	}

	/**
	 * The echo server; {@code more} are further properties of the connection, relative to
	 * {@code rdma.connections.link.} (e.g. {@code remote-access-size=64KB}).
	 */
	static ConfigurableApplicationContext server(TwoDevices.Peer peer, int port, String... more) {
		return start(EchoServer.class, side(peer, "listen=" + peer.ipv4() + ":" + port, List.of(), more));
	}

	/**
	 * The echo server with its queues on {@code peer}'s device, listening on
	 * {@code listen} (host:port), which may be another device's address.
	 */
	static ConfigurableApplicationContext serverListeningOn(TwoDevices.Peer peer, String listen) {
		return start(EchoServer.class, properties(peer, "listen=" + listen));
	}

	/** The client; {@code more} as for {@link #server}. */
	static ConfigurableApplicationContext client(TwoDevices.Peer peer, TwoDevices.Peer server, int port,
			String... more) {
		return start(Client.class,
				side(peer, "connect=" + server.ipv4() + ":" + port, List.of("source=" + peer.ipv4()), more));
	}

	/**
	 * A server whose exchange is out of band: {@code port} is the TCP port of the
	 * exchange on {@code peer}'s address; its QPs are on {@code peer}'s device (that of
	 * its queues).
	 */
	static ConfigurableApplicationContext outOfBandServer(TwoDevices.Peer peer, int port, String... more) {
		return start(EchoServer.class,
				side(peer, "listen=" + peer.ipv4() + ":" + port, List.of("exchange=out-of-band"), more));
	}

	/**
	 * A client of {@link #outOfBandServer}, its QP on {@code peer}'s device; {@code more}
	 * as for {@link #server}.
	 */
	static ConfigurableApplicationContext outOfBandClient(TwoDevices.Peer peer, TwoDevices.Peer server, int port,
			String... more) {
		return start(Client.class,
				side(peer, "connect=" + server.ipv4() + ":" + port, List.of("exchange=out-of-band"), more));
	}

	/**
	 * The properties of one side: {@link #properties}, then {@code settings} and
	 * {@code more}, each relative to {@code rdma.connections.link.}.
	 */
	private static List<String> side(TwoDevices.Peer peer, String connection, List<String> settings, String... more) {
		List<String> p = properties(peer, connection);
		for (String property : settings) {
			p.add("rdma.connections." + NAME + "." + property);
		}
		for (String property : more) {
			p.add("rdma.connections." + NAME + "." + property);
		}
		return p;
	}

	/**
	 * A server whose listener closes its own application context on the first message
	 * ({@link ClosingServer}), with {@code rdma.shutdown-timeout=20s}.
	 */
	static ConfigurableApplicationContext closingServer(TwoDevices.Peer peer, int port, String... more) {
		List<String> p = properties(peer, "listen=" + peer.ipv4() + ":" + port);
		p.replaceAll(
				property -> property.startsWith("rdma.shutdown-timeout=") ? "rdma.shutdown-timeout=20s" : property);
		p.addAll(List.of(more));
		return start(ClosingServer.class, p);
	}

	/**
	 * The application {@code app} (a configuration of this class's) with
	 * {@code properties}.
	 */
	static ConfigurableApplicationContext start(Class<?> app, List<String> properties) {
		return new SpringApplicationBuilder(app).web(WebApplicationType.NONE)
			.properties(properties.toArray(String[]::new))
			.run();
	}

	/** Writes message {@code seq} of {@code length} bytes into {@code out}. */
	static void fill(byte[] out, long seq, int length) {
		java.nio.ByteBuffer.wrap(out).putLong(0, seq);
		for (int i = 8; i < length; i++) {
			out[i] = (byte) (seq * 31 + i);
		}
	}

	/**
	 * Null when {@code message} is message {@code seq} of its length, else what is wrong.
	 */
	static String check(RdmaMessage message, long expectedLength) {
		if (message.length() != expectedLength) {
			return "length " + message.length() + " != " + expectedLength;
		}
		long seq = Long.reverseBytes(message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
		for (int i = 8; i < message.length(); i++) {
			if (message.buffer().get(ValueLayout.JAVA_BYTE, i) != (byte) (seq * 31 + i)) {
				return "message " + seq + " byte " + i + " differs";
			}
		}
		return null;
	}

	@Configuration(proxyBeanMethods = false)
	@ImportAutoConfiguration({ RdmaAutoConfiguration.class, RdmaHealthAutoConfiguration.class,
			RdmaMetricsAutoConfiguration.class })
	static class Common {

		@Bean
		MeterRegistry meterRegistry() {
			return new SimpleMeterRegistry();
		}

		@Bean
		Events events() {
			return new Events();
		}

	}

	/** Every connection event of the application, in order, with the thread of each. */
	static class Events {

		final BlockingQueue<RdmaConnectionEvent> all = new LinkedBlockingQueue<>();

		final ConcurrentLinkedQueue<String> threads = new ConcurrentLinkedQueue<>();

		/** Counted down by the application's reaction to a client that gave up. */
		final CountDownLatch gaveUp = new CountDownLatch(1);

		@EventListener
		void on(RdmaConnectionEvent event) {
			threads.add(Thread.currentThread().getName());
			all.add(event);
			if (event instanceof RdmaConnectionGaveUpEvent) {
				gaveUp.countDown();
			}
		}

		/**
		 * The next event of {@code type} within 60 s; events of other types before it are
		 * passed over.
		 */
		<T extends RdmaConnectionEvent> T next(Class<T> type) throws InterruptedException {
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
			while (true) {
				RdmaConnectionEvent event = all.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
				if (event == null) {
					throw new AssertionError("no " + type.getSimpleName() + " within 60 s");
				}
				if (type.isInstance(event)) {
					return type.cast(event);
				}
			}
		}

	}

	/** Echoes every message back to the peer it came from, from its receive buffer. */
	@Configuration(proxyBeanMethods = false)
	static class EchoServer extends Common {

		@Bean
		Echo echo() {
			return new Echo();
		}

	}

	static class Echo {

		final AtomicLong echoed = new AtomicLong();

		final ConcurrentLinkedQueue<Long> seen = new ConcurrentLinkedQueue<>();

		/**
		 * When set, the listener tries an RDMA READ of the peer's region into this
		 * segment before echoing (on the poller thread, which it must refuse), and
		 * records what it threw in {@link #readFailure}.
		 */
		volatile @Nullable MemorySegment readInListener;

		final AtomicReference<Object> readFailure = new AtomicReference<>();

		@RdmaMessageListener(connection = NAME)
		void onMessage(RdmaMessage message) {
			seen.add(Long.reverseBytes(message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 0)));
			MemorySegment target = readInListener;
			if (target != null) {
				readInListener = null;
				try {
					message.connection().read(0, target);
					readFailure.set("the read returned");
				}
				catch (RuntimeException ex) {
					readFailure.set(ex);
				}
			}
			// zero copy in: the reply is sent from the receive buffer's own view
			message.connection().send(message.byteBuffer());
			echoed.incrementAndGet();
		}

	}

	/** Closes its application context from its message listener, on the first message. */
	@Configuration(proxyBeanMethods = false)
	static class ClosingServer extends Common {

		@Bean
		SelfCloser selfCloser() {
			return new SelfCloser();
		}

	}

	static class SelfCloser extends ContextSelfCloser {

		@RdmaMessageListener(connection = NAME)
		void onMessage(RdmaMessage message) {
			closeOnFirstCall();
		}

	}

	@Configuration(proxyBeanMethods = false)
	static class Client extends Common {

		@Bean
		Collector collector() {
			return new Collector();
		}

	}

	/** Checks each echo and frees a place in the client's window. */
	static class Collector {

		final Semaphore window = new Semaphore(16);

		final ConcurrentLinkedQueue<Long> echoes = new ConcurrentLinkedQueue<>();

		final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();

		volatile int length = 64;

		@RdmaMessageListener(connection = NAME)
		void onMessage(RdmaMessage message) {
			String problem = check(message, length);
			if (problem != null) {
				problems.add(problem);
			}
			echoes.add(Long.reverseBytes(message.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 0)));
			window.release();
		}

	}

}
