package dev.rdma.sample;

import java.util.concurrent.atomic.AtomicLong;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.ExitCodeGenerator;
import org.springframework.context.annotation.Profile;
import org.springframework.stereotype.Component;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.ConnectionNotEstablishedException;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.spring.connection.support.RdmaConnectionRegistry;
import dev.rdma.verbs.CompletionQueue;

/**
 * Two-process mode, the server (profile {@code server}): echoes every message of
 * connection {@code pingpong} back to the peer it came from, checking each payload, until
 * the last message ({@code sample.messages - 1}) was echoed and the client went away;
 * then prints the summary and exits (0 only when every message was intact).
 *
 * <p>
 * A message may come twice: the client resends a message whose echo it did not get before
 * a disconnect (see {@link PingPongClient}); the server echoes it again (an echo is
 * idempotent) and counts it as a repeat. An echo that cannot be sent (the client is gone)
 * is dropped: the client resends. With {@code sample.stop-after=K} the server stops once
 * K echoes were acknowledged by the client's adapter (a restart of the server:
 * {@code scripts/lib/device-tests.sh} starts a second one, which echoes the rest).
 */
@Component
@Profile("server")
public class EchoServer implements ApplicationRunner, ExitCodeGenerator {

	private final SampleProperties properties;

	private final RdmaConnection pingpong;

	private final RdmaConnectionRegistry registry;

	private final CompletionQueue sendQueue;

	private final CompletionQueue recvQueue;

	private final AtomicLong corrupt = new AtomicLong();

	private final AtomicLong repeats = new AtomicLong();

	private final AtomicLong echoFailures = new AtomicLong();

	private volatile long highest = -1;

	private volatile boolean lastEchoed;

	private volatile long firstAt;

	private volatile int exitCode = 1;

	public EchoServer(SampleProperties properties, RdmaConnection pingpong, RdmaConnectionRegistry registry,
			@Qualifier("send") CompletionQueue sendQueue, @Qualifier("recv") CompletionQueue recvQueue) {
		this.properties = properties;
		this.pingpong = pingpong;
		this.registry = registry;
		this.sendQueue = sendQueue;
		this.recvQueue = recvQueue;
	}

	/** On the receive queue's poller: check, then echo from the receive buffer itself. */
	@RdmaMessageListener(connection = "pingpong")
	void onMessage(RdmaMessage message) {
		if (firstAt == 0) {
			firstAt = System.nanoTime();
		}
		if (!Payload.intact(message.buffer(), message.length(), properties.messageSize())) {
			corrupt.incrementAndGet();
		}
		long seq = Payload.seq(message.buffer());
		if (seq <= highest) {
			repeats.incrementAndGet(); // resent by the client: its echo was lost
		}
		else {
			highest = seq;
		}
		try {
			message.connection().send(message.byteBuffer());
		}
		catch (ConnectionNotEstablishedException ex) {
			echoFailures.incrementAndGet(); // the client is gone: it resends after
											// reconnecting
			return;
		}
		if (seq == properties.messages() - 1) {
			lastEchoed = true;
		}
	}

	@Override
	public void run(ApplicationArguments args) throws InterruptedException {
		int n = properties.messages();
		int stopAfter = properties.stopAfter();
		System.out.println("sample server: listening on " + pingpong.localAddress() + " for " + n + " messages"
				+ (stopAfter > 0 ? ", stopping after " + stopAfter + " echoes" : ""));
		long deadline = System.nanoTime() + properties.timeout().toNanos();
		boolean done = false;
		while (!done && System.nanoTime() < deadline) {
			Thread.sleep(5);
			// stop-after: that many echoes acknowledged by the client's adapter; else the
			// last message echoed and the client gone (it exits once it has every echo)
			done = stopAfter > 0 ? pingpong.statistics().messagesSent() >= stopAfter
					: lastEchoed && pingpong.peers().isEmpty();
		}
		if (done && stopAfter > 0) {
			registry.stop(); // the restart: no message is received or echoed after this
		}
		long elapsed = System.nanoTime() - (firstAt == 0 ? System.nanoTime() : firstAt);
		var stats = pingpong.statistics();
		System.out.println("== RDMA two-process summary (server" + (stopAfter > 0 ? ", stopping early" : "") + ") ==");
		System.out.printf("messages:        %d received, %d echoed, %d corrupt, sequence numbers up to %d%n",
				stats.messagesReceived(), stats.messagesSent(), corrupt.get(), highest);
		System.out.printf(
				"no-loss:         repeats %d (resent by the client), echoes not sent %d, send errors %d, "
						+ "peers accepted %d%n",
				repeats.get(), echoFailures.get(), stats.sendErrors(), stats.reconnects() + 1);
		System.out.printf("elapsed:         %.3f s%n", elapsed / 1e9);
		System.out.printf("messages/s:      %.0f received and echoed%n", stats.messagesReceived() / (elapsed / 1e9));
		System.out.printf("events:          send %d got / %d acked, recv %d got / %d acked%n", sendQueue.eventsGot(),
				sendQueue.eventsAcked(), recvQueue.eventsGot(), recvQueue.eventsAcked());
		exitCode = done && corrupt.get() == 0 ? 0 : 1;
		System.out
			.println(
					exitCode == 0
							? "RESULT: PASS, " + stats.messagesReceived() + " messages received intact and echoed"
									+ (stopAfter > 0 ? ", stopping as asked after " + stopAfter
											: ", the last one included")
							: "RESULT: FAIL, " + (done ? "" : "not done in time, ") + stats.messagesReceived()
									+ " received, " + corrupt.get() + " corrupt");
	}

	@Override
	public int getExitCode() {
		return exitCode;
	}

}
