package dev.rdma.sample;

import java.util.concurrent.atomic.AtomicLong;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.ExitCodeGenerator;
import org.springframework.context.annotation.Profile;
import org.springframework.stereotype.Component;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.verbs.CompletionQueue;

/**
 * Two-process mode, the server (profile {@code server}): echoes every message of
 * connection {@code pingpong} back to its sender, checking each payload, until
 * {@code sample.messages} were echoed and acknowledged; then prints the summary and exits
 * (0 only when every message was intact).
 */
@Component
@Profile("server")
public class EchoServer implements ApplicationRunner, ExitCodeGenerator {

	private final SampleProperties properties;

	private final RdmaConnection pingpong;

	private final CompletionQueue sendQueue;

	private final CompletionQueue recvQueue;

	private final AtomicLong corrupt = new AtomicLong();

	private volatile long firstAt;

	private volatile int exitCode = 1;

	public EchoServer(SampleProperties properties, RdmaConnection pingpong,
			@Qualifier("send") CompletionQueue sendQueue, @Qualifier("recv") CompletionQueue recvQueue) {
		this.properties = properties;
		this.pingpong = pingpong;
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
		message.connection().send(message.byteBuffer());
	}

	@Override
	public void run(ApplicationArguments args) throws InterruptedException {
		int n = properties.messages();
		System.out.println("sample server: listening on " + pingpong.localAddress() + " for " + n + " messages");
		long deadline = System.nanoTime() + properties.timeout().toNanos();
		// done when every echo was acknowledged by the client's adapter
		while (pingpong.statistics().messagesSent() < n && System.nanoTime() < deadline) {
			Thread.sleep(5);
		}
		long elapsed = System.nanoTime() - (firstAt == 0 ? System.nanoTime() : firstAt);
		var stats = pingpong.statistics();
		System.out.println("== RDMA two-process summary (server) ==");
		System.out.printf("messages:        %d received, %d echoed, %d corrupt%n", stats.messagesReceived(),
				stats.messagesSent(), corrupt.get());
		System.out.printf("elapsed:         %.3f s%n", elapsed / 1e9);
		System.out.printf("messages/s:      %.0f received and echoed%n", stats.messagesReceived() / (elapsed / 1e9));
		System.out.printf("events:          send %d got / %d acked, recv %d got / %d acked%n", sendQueue.eventsGot(),
				sendQueue.eventsAcked(), recvQueue.eventsGot(), recvQueue.eventsAcked());
		exitCode = stats.messagesReceived() == n && stats.messagesSent() == n && corrupt.get() == 0 ? 0 : 1;
		System.out.println(
				exitCode == 0 ? "RESULT: PASS, all " + n + " messages received intact and echoed" : "RESULT: FAIL, "
						+ stats.messagesReceived() + " of " + n + " received, " + corrupt.get() + " corrupt");
	}

	@Override
	public int getExitCode() {
		return exitCode;
	}

}
