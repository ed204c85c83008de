package dev.rdma.sample;

import java.util.Arrays;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.ExitCodeGenerator;
import org.springframework.context.annotation.Profile;
import org.springframework.stereotype.Component;

import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.verbs.CompletionQueue;

/**
 * Two-process mode, the client (profile {@code client}): waits until connection
 * {@code pingpong} is established (the server may start later), then sends
 * {@code sample.messages} messages one at a time, each echoed by the server, checking
 * every echo's sequence number and payload; prints the summary (round-trip p50/p99) and
 * exits (0 only when every echo came back intact and in order).
 */
@Component
@Profile("client")
public class PingPongClient implements ApplicationRunner, ExitCodeGenerator {

	private final SampleProperties properties;

	private final RdmaConnection pingpong;

	private final CompletionQueue sendQueue;

	private final CompletionQueue recvQueue;

	private final Semaphore echoed = new Semaphore(0);

	private final AtomicLong corrupt = new AtomicLong();

	private final long[] sentAt;

	private final long[] roundTrip;

	private volatile long expected;

	private volatile int exitCode = 1;

	public PingPongClient(SampleProperties properties, RdmaConnection pingpong,
			@Qualifier("send") CompletionQueue sendQueue, @Qualifier("recv") CompletionQueue recvQueue) {
		this.properties = properties;
		this.pingpong = pingpong;
		this.sendQueue = sendQueue;
		this.recvQueue = recvQueue;
		this.sentAt = new long[properties.messages()];
		this.roundTrip = new long[properties.messages()];
	}

	@RdmaMessageListener(connection = "pingpong")
	void onEcho(RdmaMessage echo) {
		long now = System.nanoTime();
		long seq = Payload.seq(echo.buffer());
		if (seq != expected || !Payload.intact(echo.buffer(), echo.length(), properties.messageSize())) {
			corrupt.incrementAndGet();
		}
		else {
			roundTrip[(int) seq] = now - sentAt[(int) seq];
		}
		echoed.release();
	}

	@Override
	public void run(ApplicationArguments args) throws InterruptedException {
		int n = properties.messages();
		long deadline = System.nanoTime() + properties.timeout().toNanos();
		while (pingpong.state() != ConnectionState.ESTABLISHED && System.nanoTime() < deadline) {
			Thread.sleep(10);
		}
		System.out.println("sample client: " + pingpong.state() + " to " + pingpong.peerAddress() + " from "
				+ pingpong.localAddress() + " on " + pingpong.deviceName());
		byte[] message = new byte[properties.messageSize()];
		int done = 0;
		long start = System.nanoTime();
		for (int seq = 0; seq < n && pingpong.state() == ConnectionState.ESTABLISHED; seq++) {
			Payload.fill(message, seq);
			expected = seq;
			sentAt[seq] = System.nanoTime();
			pingpong.send(message);
			if (!echoed.tryAcquire(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
				System.out.printf("sample client: timed out after %d of %d messages%n", done, n);
				break;
			}
			done++;
		}
		long elapsed = System.nanoTime() - start;
		long[] sorted = Arrays.copyOf(roundTrip, done);
		Arrays.sort(sorted);
		var stats = pingpong.statistics();
		System.out.println("== RDMA two-process summary (client) ==");
		System.out.printf("messages:        %d of %d echoed intact (%d corrupt or out of order)%n",
				done - corrupt.get(), n, corrupt.get());
		System.out.printf("elapsed:         %.3f s%n", elapsed / 1e9);
		System.out.printf("round trips/s:   %.0f (%d sent, %d received)%n", done / (elapsed / 1e9),
				stats.messagesSent(), stats.messagesReceived());
		if (sorted.length > 0) {
			System.out.printf("round trip:      p50 %.1f us, p99 %.1f us%n", sorted[sorted.length / 2] / 1e3,
					sorted[(int) Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] / 1e3);
		}
		System.out.printf("events:          send %d got / %d acked, recv %d got / %d acked%n", sendQueue.eventsGot(),
				sendQueue.eventsAcked(), recvQueue.eventsGot(), recvQueue.eventsAcked());
		exitCode = done == n && corrupt.get() == 0 ? 0 : 1;
		System.out.println(exitCode == 0 ? "RESULT: PASS, all " + n + " messages echoed intact"
				: "RESULT: FAIL, " + (n - done + corrupt.get()) + " messages missing or corrupt");
	}

	@Override
	public int getExitCode() {
		return exitCode;
	}

}
