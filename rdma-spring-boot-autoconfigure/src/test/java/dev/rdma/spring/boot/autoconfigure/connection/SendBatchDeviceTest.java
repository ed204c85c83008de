package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.LongStream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.SendBatch;
import dev.rdma.spring.connection.SendBuffer;
import dev.rdma.spring.connection.SendQueueFullException;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static dev.rdma.verbs.testing.DeviceTestSupport.randomPort;
import static dev.rdma.verbs.testing.NoNativeLeaks.awaitNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Batched, concurrent and zero-copy sends (issue 33) through one connected pair of the
 * echo applications (8 KiB messages, two devices): a {@link SendBatch} of 16 goes out in
 * one {@code ibv_post_send} ({@code sendPosts} +1, {@code sendsPosted} +16); four threads
 * sending at once, with single sends, batches and in-place writes, deliver every message
 * exactly once and each thread's in its order; a borrowed {@link SendBuffer} arrives
 * intact, refuses use after its send, and is back in the pool once its completion came
 * (the next borrow lends the same buffer: the pool is a stack).
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SendBatchDeviceTest {

	private static final int SIZE = 8192;

	private long baseline;

	private AppPair apps;

	private RdmaConnection link;

	private ConnectionApps.Collector collector;

	private ConnectionApps.Echo echo;

	@BeforeAll
	void start() throws InterruptedException {
		TwoDevices two = TwoDevices.require();
		baseline = NativeObjects.open();
		// the server echoes from its poller, which also polls its send completions: the
		// senders keep at most 16 messages unanswered (the echo window), as a reply
		// window below send-depth must be (docs/connections.md), else the poller waits
		// for a send buffer only it can free. A sender may wait for its window longer
		// than the default send-timeout under emulation: 30 s
		apps = AppPair.start(two, randomPort(), List.of("message-size=" + SIZE),
				List.of("message-size=" + SIZE, "send-timeout=30s"));
		apps.awaitConnected();
		link = apps.link;
		collector = apps.collector;
		echo = apps.server.getBean(ConnectionApps.Echo.class);
	}

	@AfterAll
	void stop() throws InterruptedException {
		if (apps != null) {
			apps.close();
			awaitNativeObjectsClosed(baseline, Duration.ofSeconds(60), "both applications closed");
		}
	}

	@Test
	void aBatchGoesOutInOnePost() throws InterruptedException {
		settle();
		collector.echoes.clear();
		collector.problems.clear();
		collector.length = 64;
		SendBatch batch = link.newSendBatch();
		byte[] message = new byte[64];
		for (long seq = 1000; seq < 1016; seq++) {
			ConnectionApps.fill(message, seq, 64);
			batch.add(message);
		}
		assertThat(batch.size()).isEqualTo(16);
		ConnectionStatistics before = link.statistics();
		batch.send();
		ConnectionStatistics after = link.statistics();
		assertThat(batch.size()).isZero();
		assertThat(after.sendPosts() - before.sendPosts()).as("ibv_post_send calls for a batch of 16").isEqualTo(1);
		assertThat(after.sendsPosted() - before.sendsPosted()).as("work requests posted").isEqualTo(16);
		await("16 echoes", () -> collector.echoes.size() == 16);
		assertThat(collector.problems).isEmpty();
		assertThat(new ArrayList<>(collector.echoes)).as("in the order added").isEqualTo(sequence(1000, 1016));
		assertThat(link.statistics().sendsRefused()).isZero();
	}

	@Test
	void sendsOfSeveralThreadsArriveOnceEachInEachThreadsOrder() throws Exception {
		settle();
		int threads = 4;
		int perThread = 100;
		collector.echoes.clear();
		collector.problems.clear();
		collector.length = 64;
		echo.seen.clear();
		collector.window.drainPermits();
		collector.window.release(16);
		long postedBefore = link.statistics().sendsPosted();
		long postsBefore = link.statistics().sendPosts();
		CountDownLatch go = new CountDownLatch(1);
		ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
		List<CompletableFuture<Void>> senders = new ArrayList<>();
		for (int t = 0; t < threads; t++) {
			long base = (t + 1) * 1_000_000L;
			int kind = t;
			senders.add(CompletableFuture.runAsync(() -> {
				try {
					go.await();
					sendFrom(kind, base, perThread);
				}
				catch (Throwable ex) {
					failures.add(ex);
				}
			}, (r) -> new Thread(r, "sender-" + kind).start()));
		}
		go.countDown();
		CompletableFuture.allOf(senders.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
		assertThat(failures).isEmpty();
		int total = threads * perThread;
		await(total + " echoes", () -> collector.echoes.size() == total);
		assertThat(collector.problems).isEmpty();
		assertThat(new HashSet<>(collector.echoes)).as("distinct echoes").hasSize(total);
		// the order the server received them in: each thread's messages in its order
		List<Long> seen = new ArrayList<>(echo.seen);
		assertThat(seen).hasSize(total);
		long[] next = new long[threads];
		for (long seq : seen) {
			int t = (int) (seq / 1_000_000L) - 1;
			assertThat(seq % 1_000_000L).as("thread %d's next message at the server", t).isEqualTo(next[t]);
			next[t]++;
		}
		assertThat(next).containsOnly(perThread);
		ConnectionStatistics after = link.statistics();
		assertThat(after.sendsPosted() - postedBefore).isEqualTo(total);
		assertThat(after.sendsRefused()).isZero();
		System.out.println("SEND-BATCH " + total + " messages of " + threads + " threads in "
				+ (after.sendPosts() - postsBefore) + " posts");
	}

	/**
	 * Thread {@code kind}'s messages {@code base .. base+count-1}: single sends (0),
	 * batches of 5 (1), in-place writes (2), single and batched in turn (3).
	 */
	private void sendFrom(int kind, long base, int count) throws InterruptedException {
		byte[] message = new byte[64];
		SendBatch batch = link.newSendBatch();
		for (int i = 0; i < count; i++) {
			long seq = base + i;
			// a place in the echo window (16; a batch holds at most 4 while it fills)
			assertThat(collector.window.tryAcquire(60, TimeUnit.SECONDS)).as("echo window, message " + seq).isTrue();
			ConnectionApps.fill(message, seq, 64);
			boolean batched = kind == 1 || (kind == 3 && (i / 5) % 2 == 1);
			if (batched) {
				batch.add(message);
				if (batch.size() == 5) {
					batch.send();
				}
			}
			else if (kind == 2) {
				link.send((segment) -> {
					MemorySegment.copy(MemorySegment.ofArray(message), 0, segment, 0, 64);
					return 64;
				});
			}
			else {
				link.send(message);
			}
		}
		batch.send();
	}

	@Test
	void aBorrowedBufferIsSentWithoutACopyAndComesBackOnItsCompletion() throws InterruptedException {
		settle();
		collector.echoes.clear();
		collector.problems.clear();
		collector.length = SIZE - 192;
		byte[] message = new byte[SIZE - 192];
		ConnectionApps.fill(message, 2000, message.length);
		long sentBefore = link.statistics().messagesSent();
		SendBuffer buffer = link.borrowSendBuffer();
		MemorySegment segment = buffer.segment();
		assertThat(segment.byteSize()).isEqualTo(SIZE);
		assertThat(segment.isNative()).as("registered memory").isTrue();
		MemorySegment.copy(MemorySegment.ofArray(message), 0, segment, 0, message.length);
		buffer.send(message.length);
		assertThatThrownBy(buffer::segment).as("use after send").isInstanceOf(IllegalStateException.class);
		assertThatThrownBy(() -> buffer.send(8)).as("a second send").isInstanceOf(IllegalStateException.class);
		buffer.close(); // nothing after send
		await("the echo", () -> collector.echoes.size() == 1);
		assertThat(collector.problems).isEmpty();
		assertThat(collector.echoes).containsExactly(2000L);
		await("the send's completion", () -> link.statistics().messagesSent() == sentBefore + 1);
		// given back on its completion: the pool is a stack, the next borrow lends it
		SendBuffer again = link.borrowSendBuffer();
		assertThat(again).as("the buffer came back").isSameAs(buffer);
		assertThat(again.segment().address()).isEqualTo(segment.address());
		again.close();
		assertThatThrownBy(again::segment).as("given back").isInstanceOf(IllegalStateException.class);
		assertThat(link.borrowSendBuffer()).as("given back unsent").isSameAs(buffer);
		buffer.close();
	}

	/**
	 * A batch that finds no free buffer sends what it holds before it waits. A client of
	 * 8 send buffers signaling one send in 8: its first batch of 8 goes out with only the
	 * first send signaled (it took the last buffer), so that completion frees one buffer
	 * and the other seven stay in flight, done but unreclaimed until a later signaled
	 * completion. The second batch takes the free buffer and finds none for its second
	 * message: before, its add waited for a completion that nothing would give, until
	 * {@code send-timeout} (20 s here), and threw {@link SendQueueFullException}. Now it
	 * posts the message it holds (signaled: the interval is due), whose completion frees
	 * the seven, and goes on: the batch goes out in two posts, all sixteen messages
	 * arrive in order. Its own pair of applications, for the client's settings.
	 */
	@Test
	void aBatchThatFindsNoFreeBufferSendsWhatItHoldsBeforeItWaits() throws InterruptedException {
		TwoDevices two = TwoDevices.require();
		try (AppPair small = AppPair.start(two, randomPort(), List.of(),
				List.of("send-depth=8", "signal-interval=8", "send-timeout=20s"))) {
			small.awaitConnected();
			RdmaConnection client = small.link;
			ConnectionApps.Collector echoes = small.collector;
			SendBatch batch = client.newSendBatch();
			byte[] message = new byte[64];
			for (long seq = 3000; seq < 3008; seq++) {
				ConnectionApps.fill(message, seq, 64);
				batch.add(message);
			}
			batch.send();
			await("the first batch's echoes", () -> echoes.echoes.size() == 8);
			await("the first batch's signaled completion", () -> client.statistics().messagesSent() >= 1);
			ConnectionStatistics before = client.statistics();
			assertThat(before.messagesSent()).as("sends completed: only the signaled one is reclaimed").isOne();
			long started = System.nanoTime();
			for (long seq = 3008; seq < 3016; seq++) {
				ConnectionApps.fill(message, seq, 64);
				batch.add(message);
			}
			batch.send();
			assertThat(Duration.ofNanos(System.nanoTime() - started))
				.as("the second batch did not wait for send-timeout")
				.isLessThan(Duration.ofSeconds(20));
			ConnectionStatistics after = client.statistics();
			assertThat(after.sendPosts() - before.sendPosts()).as("posts of the second batch").isEqualTo(2);
			assertThat(after.sendsPosted() - before.sendsPosted()).isEqualTo(8);
			await("sixteen echoes", () -> echoes.echoes.size() == 16);
			assertThat(echoes.problems).isEmpty();
			assertThat(new ArrayList<>(echoes.echoes)).as("in the order added").isEqualTo(sequence(3000, 3016));
			assertThat(after.sendsRefused()).isZero();
		}
	}

	/**
	 * The sequence numbers {@code from} (inclusive) to {@code to} (exclusive), in order.
	 */
	private static List<Long> sequence(long from, long to) {
		return LongStream.range(from, to).boxed().toList();
	}

	/** Waits until every send so far has completed (no echo or completion to come). */
	private void settle() throws InterruptedException {
		await("every send completed", () -> {
			ConnectionStatistics s = link.statistics();
			return s.messagesSent() + s.sendErrors() == s.sendsPosted();
		});
	}

}
