package dev.rdma.sample;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.ExitCodeGenerator;
import org.springframework.context.annotation.Profile;
import org.springframework.stereotype.Component;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * Ping-pong over a QP connected to itself: the runner posts one message at a time
 * (SEND_WITH_IMM, the sequence number as immediate data and in the payload); the receive
 * listener checks it, re-posts the receive and lets the next message go. Latency is
 * measured from the post to the receive listener.
 */
@Component
@Profile("!server & !client")
public class PingPong implements ApplicationRunner, ExitCodeGenerator, DisposableBean {

	private static final int RECEIVE_SLOTS = 16;

	private final SampleProperties properties;

	private final CompletionQueue sendQueue;

	private final CompletionQueue recvQueue;

	private final LoopbackQueuePair qp;

	private final long[] postedAt;

	private final long[] latencyNanos;

	private final AtomicLong received = new AtomicLong();

	private final AtomicLong sendCompletions = new AtomicLong();

	private final AtomicLong corrupt = new AtomicLong();

	private volatile CountDownLatch next = new CountDownLatch(1);

	/** The first failed completion, as the summary names it; null while none failed. */
	private volatile String firstFailure;

	private volatile int exitCode = 1;

	public PingPong(SampleProperties properties, @Qualifier("nic0") Context context,
			@Qualifier("send") CompletionQueue sendQueue, @Qualifier("recv") CompletionQueue recvQueue) {
		this.properties = properties;
		this.sendQueue = sendQueue;
		this.recvQueue = recvQueue;
		this.qp = new LoopbackQueuePair(context, sendQueue, recvQueue, 2 * RECEIVE_SLOTS, properties.messageSize());
		this.postedAt = new long[properties.messages()];
		this.latencyNanos = new long[properties.messages()];
		for (int slot = 0; slot < RECEIVE_SLOTS; slot++) {
			qp.postRecv(slot, slot);
		}
	}

	/** Receive side: one call per completion, on thread rdma-poller-recv. */
	@RdmaCompletionListener(queue = "recv", fields = { WcExFlag.BYTE_LEN, WcExFlag.IMM })
	public void onReceive(WorkCompletion wc) {
		int slot = (int) wc.wrId();
		if (wc.status() != WcStatus.SUCCESS || wc.opcode() != WcOpcode.RECV) {
			if (wc.status() != WcStatus.WR_FLUSH_ERR) {
				corrupt.incrementAndGet();
			}
			failed("receive", wc);
			return;
		}
		int seq = wc.immData();
		long now = System.nanoTime();
		if (seq < 0 || seq >= postedAt.length || wc.byteLen() != properties.messageSize() || !intact(slot, seq)) {
			corrupt.incrementAndGet();
		}
		else {
			latencyNanos[seq] = now - postedAt[seq];
		}
		qp.postRecv(slot, slot);
		received.incrementAndGet();
		next.countDown();
	}

	/** Send side: one call per poll batch, on thread rdma-poller-send. */
	@RdmaCompletionListener(queue = "send", batch = true)
	public void onSendBatch(CompletionBatch batch) {
		for (int i = 0; i < batch.size(); i++) {
			WorkCompletion wc = batch.get(i);
			if (wc.status() != WcStatus.SUCCESS) {
				corrupt.incrementAndGet();
				failed("send", wc);
			}
		}
		sendCompletions.addAndGet(batch.size());
	}

	/**
	 * Keeps the first failed completion (on a failed completion only wr_id, status,
	 * qp_num and vendor_err are valid) and lets the runner stop at once instead of
	 * waiting for its timeout: after a failed send, the QP is in error and nothing more
	 * arrives.
	 */
	private void failed(String side, WorkCompletion wc) {
		if (firstFailure == null) {
			firstFailure = side + " completion wr_id " + wc.wrId() + ": " + wc.status() + " (vendor_err 0x"
					+ Integer.toHexString(wc.vendorErr()) + ")";
		}
		next.countDown();
	}

	private boolean intact(int slot, int seq) {
		MemorySegment payload = qp.mr().buffer().asSlice(qp.recvOffset(slot), properties.messageSize());
		if (payload.get(JAVA_LONG_UNALIGNED, 0) != seq) {
			return false;
		}
		for (long i = 8; i < payload.byteSize(); i++) {
			if (payload.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != (byte) (seq + i)) {
				return false;
			}
		}
		return true;
	}

	@Override
	public void run(ApplicationArguments args) throws InterruptedException {
		int n = properties.messages();
		int size = properties.messageSize();
		MemorySegment sendBuffer = qp.mr().buffer();
		long deadline = System.nanoTime() + properties.timeout().toNanos();
		long start = System.nanoTime();
		for (int seq = 0; seq < n; seq++) {
			int slot = seq % RECEIVE_SLOTS;
			MemorySegment payload = sendBuffer.asSlice(qp.sendOffset(slot), size);
			payload.set(JAVA_LONG_UNALIGNED, 0, seq);
			for (long i = 8; i < size; i++) {
				payload.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (seq + i));
			}
			CountDownLatch arrived = new CountDownLatch(1);
			next = arrived;
			postedAt[seq] = System.nanoTime();
			qp.postSend(seq, slot, size, seq);
			if (!arrived.await(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
				System.out.printf("sample: timed out after %d of %d messages%n", received.get(), n);
				break;
			}
			String failure = firstFailure;
			if (failure != null) {
				System.out.printf("sample: stopped after %d of %d messages: %s%n", received.get(), n, failure);
				break;
			}
		}
		long elapsed = System.nanoTime() - start;
		while (sendCompletions.get() < received.get() && System.nanoTime() < deadline) {
			Thread.onSpinWait();
		}
		report(n, elapsed);
	}

	private void report(int n, long elapsedNanos) {
		long ok = received.get();
		long[] sorted = Arrays.copyOf(latencyNanos, (int) Math.min(ok, n));
		Arrays.sort(sorted);
		double seconds = elapsedNanos / 1e9;
		long completions = ok + sendCompletions.get();
		System.out.println("== RDMA ping-pong summary ==");
		System.out.printf("messages:        %d of %d delivered intact (%d corrupt or failed)%n", ok - corrupt.get(), n,
				corrupt.get());
		System.out.printf("elapsed:         %.3f s%n", seconds);
		System.out.printf("completions/s:   %.0f (%d send + %d receive completions)%n", completions / seconds,
				sendCompletions.get(), ok);
		if (sorted.length > 0) {
			System.out.printf("post->listener:  p50 %.1f us, p99 %.1f us%n", sorted[sorted.length / 2] / 1e3,
					sorted[(int) Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] / 1e3);
		}
		System.out.printf("events:          send %d got / %d acked, recv %d got / %d acked%n", sendQueue.eventsGot(),
				sendQueue.eventsAcked(), recvQueue.eventsGot(), recvQueue.eventsAcked());
		if (firstFailure != null) {
			System.out.printf("first failure:   %s%n", firstFailure);
		}
		exitCode = ok == n && corrupt.get() == 0 && firstFailure == null ? 0 : 1;
		System.out.println(exitCode == 0 ? "RESULT: PASS, all " + n + " messages delivered intact"
				: "RESULT: FAIL, " + (n - ok + corrupt.get()) + " messages missing or corrupt");
	}

	@Override
	public int getExitCode() {
		return exitCode;
	}

	@Override
	public void destroy() {
		qp.close();
	}

}
