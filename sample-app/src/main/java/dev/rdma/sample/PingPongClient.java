package dev.rdma.sample;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.ExitCodeGenerator;
import org.springframework.context.annotation.Profile;
import org.springframework.stereotype.Component;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.verbs.CompletionQueue;

/**
 * Two-process mode, the client (profile {@code client}): waits until connection
 * {@code pingpong} is established (the server may start later), then sends
 * {@code sample.messages} messages one at a time, each echoed by the server, checking
 * every echo's sequence number and payload; prints the summary (round-trip p50/p99) and
 * exits (0 only when every sequence number was echoed exactly once, in order, intact).
 *
 * <p>
 * <b>No loss across disconnects</b> (a pattern to copy). A send that was posted before a
 * disconnect may be flushed, and an echo the server posted may never arrive: the
 * connection reconnects by itself, but what was in flight is the application's to resend.
 * Each message carries its sequence number ({@link Payload}); exactly ONE is in flight.
 * The client sends it on the current connection itself ({@code peers().get(0)} of the
 * bean: the queue pair of this connection, which never reconnects) and watches that
 * connection's state. When it leaves ESTABLISHED before the echo came (or the send throws
 * {@link ConnectionNotEstablishedException}), the client waits until the bean is
 * established on a new connection, looks once more whether the echo came in meanwhile,
 * and if not sends the same message again. The server echoes whatever it receives, a
 * resent message too.
 *
 * <p>
 * <b>Why a resend cannot produce a duplicate echo here.</b> Nothing is deduplicated: the
 * client counts each sequence number's echoes and fails on any count but one. An echo of
 * the first copy can only arrive over the connection (queue pair) the first copy went on.
 * The client resends only once the connection is ESTABLISHED again, and the starter
 * establishes a new connection only after the old one is closed: its queue pair in error,
 * every receive completion drained through the poller to the listener, the queue pair
 * destroyed. So by the time of the resend, the first copy's echo either was counted (and
 * the client does not resend) or can never arrive; and with one message in flight there
 * is no other outstanding message whose echo could arrive late. The server may see a
 * message twice (its first echo was lost); that is harmless for an echo. A window of
 * several messages works the same way (resend every unechoed one, in order) as long as
 * the server's handling is idempotent.
 *
 * <p>
 * <b>Provoking the events</b> ({@code scripts/lib/device-tests.sh}):
 * {@code sample.reconnect-after=M} makes this client close its connection right after
 * posting message M (its echo may or may not arrive) and open it again, through the
 * {@link RdmaConnectionRegistry} lifecycle ({@code stop()} closes every connection of the
 * application, {@code start()} connects again); the server's {@code sample.stop-after}
 * restarts the server.
 */
@Component
@Profile("client")
public class PingPongClient implements ApplicationRunner, ExitCodeGenerator {

	/** How often a wait for an echo looks whether the connection is still up. */
	private static final long CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

	private final SampleProperties properties;

	private final RdmaConnection pingpong;

	private final RdmaConnectionRegistry registry;

	private final CompletionQueue sendQueue;

	private final CompletionQueue recvQueue;

	/** Released once per first echo of the message in flight. */
	private final Semaphore echoed = new Semaphore(0);

	/** Echoes received per sequence number (written by the listener's thread). */
	private final AtomicIntegerArray echoes;

	private final AtomicLong corrupt = new AtomicLong();

	private final AtomicLong outOfOrder = new AtomicLong();

	private final AtomicLong unknown = new AtomicLong();

	private final long[] sentAt;

	private final long[] roundTrip;

	private volatile long expected = -1;

	private volatile int exitCode = 1;

	public PingPongClient(SampleProperties properties, RdmaConnection pingpong, RdmaConnectionRegistry registry,
			@Qualifier("send") CompletionQueue sendQueue, @Qualifier("recv") CompletionQueue recvQueue) {
		this.properties = properties;
		this.pingpong = pingpong;
		this.registry = registry;
		this.sendQueue = sendQueue;
		this.recvQueue = recvQueue;
		this.echoes = new AtomicIntegerArray(properties.messages());
		this.sentAt = new long[properties.messages()];
		this.roundTrip = new long[properties.messages()];
	}

	/** On the receive queue's poller: count the echo, check it, let the next go. */
	@RdmaMessageListener(connection = "pingpong")
	void onEcho(RdmaMessage echo) {
		long now = System.nanoTime();
		long seq = Payload.seq(echo.buffer());
		if (seq < 0 || seq >= echoes.length()) {
			unknown.incrementAndGet();
			return;
		}
		int count = echoes.incrementAndGet((int) seq);
		if (!Payload.intact(echo.buffer(), echo.length(), properties.messageSize())) {
			corrupt.incrementAndGet();
		}
		if (seq != expected) {
			outOfOrder.incrementAndGet(); // a late or duplicated echo: the check below
											// fails
			return;
		}
		if (count == 1) {
			roundTrip[(int) seq] = now - sentAt[(int) seq];
			echoed.release();
		}
	}

	@Override
	public void run(ApplicationArguments args) throws InterruptedException {
		int n = properties.messages();
		long deadline = System.nanoTime() + properties.timeout().toNanos();
		if (!awaitEstablished(deadline)) {
			System.out.println("sample client: never connected (" + pingpong.state() + ")");
		}
		System.out.println("sample client: " + pingpong.state() + " to " + pingpong.peerAddress() + " from "
				+ pingpong.localAddress() + " on " + pingpong.deviceName() + ", " + n + " messages"
				+ (properties.reconnectAfter() > 0 ? ", reconnecting after " + properties.reconnectAfter() : ""));
		byte[] message = new byte[properties.messageSize()];
		int done = 0;
		long resent = 0;
		boolean reconnected = false;
		long start = System.nanoTime();
		RdmaConnection link = null; // the connection (queue pair) the message in flight
									// went on
		send: for (int seq = 0; seq < n; seq++) {
			Payload.fill(message, seq);
			expected = seq;
			sentAt[seq] = System.nanoTime();
			boolean first = true;
			while (true) {
				if (!first) {
					// the connection this message went on has ended: wait for a new one
					// (established only once the old one is closed and drained), then
					// resend
					// unless the echo arrived meanwhile
					if (!awaitNewConnection(link, deadline)) {
						System.out.printf("sample client: not reconnected in time at message %d (%s)%n", seq,
								pingpong.state());
						break send;
					}
					if (echoed.tryAcquire()) {
						System.out.printf("sample client: reconnected; the echo of message %d came before "
								+ "the old connection closed: not resent%n", seq);
						break;
					}
					System.out.printf("sample client: reconnected; resending message %d (no echo)%n", seq);
					resent++;
				}
				first = false;
				// send on the current connection itself, not on the bean: the one to
				// watch
				List<RdmaConnection> current = pingpong.peers();
				if (current.isEmpty()) {
					continue; // between connections
				}
				link = current.get(0);
				try {
					link.send(message);
				}
				catch (ConnectionNotEstablishedException ex) {
					continue; // not sent: after the reconnect
				}
				if (seq == properties.reconnectAfter() && seq > 0 && !reconnected) {
					reconnected = true;
					reconnect(seq);
					continue; // the echo may or may not have arrived
				}
				Boolean arrived = awaitEcho(link, deadline);
				if (arrived == null) {
					System.out.printf("sample client: timed out at message %d of %d%n", seq, n);
					break send;
				}
				if (arrived) {
					break;
				}
			}
			done++;
		}
		long elapsed = System.nanoTime() - start;
		report(n, done, resent, elapsed);
	}

	/**
	 * Waits for the echo of the message in flight: true when it came, false when
	 * {@code link}, the connection it went on, ended first, null at the deadline.
	 */
	private Boolean awaitEcho(RdmaConnection link, long deadline) throws InterruptedException {
		while (true) {
			if (echoed.tryAcquire(CHECK_NANOS, TimeUnit.NANOSECONDS)) {
				return true;
			}
			if (link.state() != ConnectionState.ESTABLISHED) {
				return false;
			}
			if (System.nanoTime() - deadline >= 0) {
				return null;
			}
		}
	}

	/** Waits until the client is established on a connection other than {@code old}. */
	private boolean awaitNewConnection(@Nullable RdmaConnection old, long deadline) throws InterruptedException {
		while (true) {
			List<RdmaConnection> current = pingpong.peers();
			if (!current.isEmpty() && current.get(0) != old && current.get(0).state() == ConnectionState.ESTABLISHED) {
				return true;
			}
			if (System.nanoTime() - deadline >= 0) {
				return false;
			}
			Thread.sleep(5);
		}
	}

	private boolean awaitEstablished(long deadline) throws InterruptedException {
		return awaitNewConnection(null, deadline);
	}

	/** A client disconnect: close the application's connections and connect again. */
	private void reconnect(int seq) {
		System.out
			.println("sample client: closing the connection with message " + seq + " in flight, then reconnecting");
		registry.stop();
		registry.start();
	}

	private void report(int n, int done, long resent, long elapsedNanos) {
		int missing = 0;
		long duplicates = 0;
		for (int i = 0; i < echoes.length(); i++) {
			int count = echoes.get(i);
			if (count == 0) {
				missing++;
			}
			else {
				duplicates += count - 1;
			}
		}
		long[] sorted = Arrays.copyOf(roundTrip, done);
		Arrays.sort(sorted);
		var stats = pingpong.statistics();
		System.out.println("== RDMA two-process summary (client) ==");
		System.out.printf("messages:        %d of %d echoed (%d corrupt, %d out of order, %d unknown)%n", done, n,
				corrupt.get(), outOfOrder.get(), unknown.get());
		System.out.printf("no-loss:         resent %d, reconnects %d, duplicates %d, missing %d%n", resent,
				stats.reconnects(), duplicates, missing);
		System.out.printf("elapsed:         %.3f s%n", elapsedNanos / 1e9);
		System.out.printf("round trips/s:   %.0f (%d sent, %d received, %d send errors)%n", done / (elapsedNanos / 1e9),
				stats.messagesSent(), stats.messagesReceived(), stats.sendErrors());
		if (sorted.length > 0) {
			System.out.printf("round trip:      p50 %.1f us, p99 %.1f us%n", sorted[sorted.length / 2] / 1e3,
					sorted[(int) Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] / 1e3);
		}
		System.out.printf("events:          send %d got / %d acked, recv %d got / %d acked%n", sendQueue.eventsGot(),
				sendQueue.eventsAcked(), recvQueue.eventsGot(), recvQueue.eventsAcked());
		boolean pass = done == n && missing == 0 && duplicates == 0 && corrupt.get() == 0 && outOfOrder.get() == 0
				&& unknown.get() == 0;
		exitCode = pass ? 0 : 1;
		System.out.println(pass ? "RESULT: PASS, all " + n + " messages echoed exactly once, in order, intact"
				: "RESULT: FAIL, " + missing + " missing, " + duplicates + " duplicated, " + outOfOrder.get()
						+ " out of order, " + corrupt.get() + " corrupt");
	}

	@Override
	public int getExitCode() {
		return exitCode;
	}

}
