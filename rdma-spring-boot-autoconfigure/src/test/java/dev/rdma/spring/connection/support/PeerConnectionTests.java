package dev.rdma.spring.connection.support;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.spring.connection.RemoteAccessException;
import dev.rdma.spring.connection.RdmaMessage;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionId;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyList;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.BDDMockito.given;
import static org.mockito.BDDMockito.willAnswer;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.never;
import static org.mockito.Mockito.timeout;
import static org.mockito.Mockito.verify;

/**
 * A {@link PeerConnection} whose construction fails after its queue pair and memory
 * regions exist destroys them: a failed connection attempt, repeated by the client's
 * retries, leaks nothing. A failed completion (not a flush) ends the connection and wakes
 * its owner. Without a device: the verbs objects are mocks.
 */
class PeerConnectionTests {

	private static final int MESSAGE_SIZE = 64;

	private final Arena arena = Arena.ofShared();

	private final QueuePair qp = mock(QueuePair.class);

	private final MemoryRegion sendRegion = mock(MemoryRegion.class);

	private final MemoryRegion receiveRegion = mock(MemoryRegion.class);

	private final ExecutorService threads = Executors.newCachedThreadPool();

	private final ConnectionCounters counters = new ConnectionCounters();

	@AfterEach
	void closeArena() {
		threads.shutdownNow();
		arena.close();
	}

	/** A peer connection on mocks: 2 send buffers, 1 receive buffer of 64 bytes. */
	private PeerConnection peer(@Nullable MessageListenerBinding listener) {
		return peer(listener, (peer) -> false);
	}

	/**
	 * As {@link #peer(MessageListenerBinding)}, its close taken over by {@code handOver}.
	 */
	private PeerConnection peer(@Nullable MessageListenerBinding listener, Predicate<PeerConnection> handOver) {
		ConnectionSettings settings = new ConnectionSettings("orders", false, new InetSocketAddress("10.0.0.2", 7471),
				null, 1, Duration.ofSeconds(5),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 2, Duration.ofSeconds(5), 0), "tx", "rx", 2, 1, 1,
				MESSAGE_SIZE, Duration.ofSeconds(1), false, CmParameters.DEFAULTS, Duration.ofSeconds(5));
		ProtectionDomain pd = mock(ProtectionDomain.class);
		given(pd.createQueuePair(any())).willReturn(qp);
		given(pd.registerMemory(anyLong(), any())).willReturn(sendRegion, receiveRegion);
		given(sendRegion.buffer()).willReturn(arena.allocate(2 * MESSAGE_SIZE));
		given(receiveRegion.buffer()).willReturn(arena.allocate(MESSAGE_SIZE));
		return new PeerConnection(settings, counters, new PeerLink.Cm(mock(ConnectionId.class)), pd,
				mock(CompletionQueue.class), mock(CompletionQueue.class), listener,
				List.of(new CompletionRouter("tx"), new CompletionRouter("rx")), handOver);
	}

	private static WorkCompletion completion(long wrId, WcStatus status, int byteLen) {
		WorkCompletion wc = mock(WorkCompletion.class);
		given(wc.wrId()).willReturn(wrId);
		given(wc.statusCode()).willReturn(status.code());
		given(wc.byteLen()).willReturn(byteLen);
		return wc;
	}

	/** Calls of the failure callback of {@link #establishedWithOneSend()}'s peer. */
	private final AtomicInteger wakeUps = new AtomicInteger();

	/** An established peer with one send in flight (send buffer 0). */
	private PeerConnection establishedWithOneSend() {
		PeerConnection peer = peer(null);
		peer.onFailure(wakeUps::incrementAndGet);
		peer.postReceives();
		peer.established();
		peer.send(new byte[8], 0, 8);
		return peer;
	}

	@Test
	void aSendThatFailsWithRetryExceededEndsTheConnectionAndWakesItsOwner() {
		PeerConnection peer = establishedWithOneSend();
		peer.onCompletion(completion(PeerConnection.SEND, WcStatus.RETRY_EXC_ERR, 0));
		assertThat(peer.failure()).isEqualTo("RETRY_EXC_ERR");
		assertThat(peer.state()).isEqualTo(ConnectionState.DISCONNECTED);
		assertThat(wakeUps).hasValue(1);
		ClientTransport.End end = ClientTransport.End.failureOf(peer);
		assertThat(end).isNotNull();
		assertThat(end.kind()).isEqualTo("RETRY_EXC_ERR");
		assertThat(end.description()).contains("RETRY_EXC_ERR");
		// later failures (the flushes of the QP in error) change nothing
		peer.onCompletion(completion(0, WcStatus.WR_FLUSH_ERR, 0));
		assertThat(peer.failure()).isEqualTo("RETRY_EXC_ERR");
		assertThat(wakeUps).hasValue(1);
	}

	/**
	 * An established peer whose peer offered a region, and the READs it posts: per chain,
	 * which of its work requests were signaled when posted.
	 */
	private PeerConnection readingPeer(List<List<Boolean>> signaled) {
		willAnswer((call) -> {
			List<SendWorkRequest> chain = call.getArgument(0);
			signaled.add(chain.stream().map((wr) -> wr.hasFlag(SendWorkRequest.Flag.SIGNALED)).toList());
			return null;
		}).given(qp).postSend(anyList());
		PeerConnection peer = peer(null);
		peer.postReceives();
		peer.remoteRegion(new RemoteRegion(0x10000, 7, 4096));
		peer.established();
		return peer;
	}

	/** A batch of two READs on {@code peer}, read on another thread. */
	private CompletableFuture<Void> readTwo(PeerConnection peer) {
		ReadBatch batch = new PeerReadBatch(() -> peer, PeerReadBatchTests.ORDERS);
		batch.add(0, arena.allocate(8)).add(8, arena.allocate(8));
		return CompletableFuture.runAsync(batch::read, threads);
	}

	@Test
	void aGroupOfReadsSignalsItsLastWhoseCompletionCompletesTheOthers() throws Exception {
		List<List<Boolean>> signaled = new CopyOnWriteArrayList<>();
		PeerConnection peer = readingPeer(signaled);
		CompletableFuture<Void> reading = readTwo(peer);
		verify(qp, timeout(5000)).postSend(anyList());
		assertThat(signaled).as("one chain: the first READ unsignaled, the last signaled")
			.containsExactly(List.of(false, true));
		// the pool hands out buffer 0, then 1: the last READ is buffer 1's
		peer.onCompletion(completion(PeerConnection.SEND | PeerConnection.ONE_SIDED | PeerConnection.READ | 1,
				WcStatus.SUCCESS, 0));
		reading.get(5, TimeUnit.SECONDS);
		assertThat(counters.bytesRead.sum()).as("both READs read, with one completion").isEqualTo(16);
	}

	@Test
	void aFlushedLastReadOfAGroupFailsTheUnsignaledOnesBeforeIt() {
		PeerConnection peer = readingPeer(new CopyOnWriteArrayList<>());
		CompletableFuture<Void> reading = readTwo(peer);
		verify(qp, timeout(5000)).postSend(anyList());
		// the QP went to the error state after the READ that failed first, which had a
		// completion of its own: READs completed by a flush were flushed too
		peer.onCompletion(completion(PeerConnection.SEND | PeerConnection.ONE_SIDED | PeerConnection.READ | 1,
				WcStatus.WR_FLUSH_ERR, 0));
		assertThatThrownBy(() -> reading.get(5, TimeUnit.SECONDS)).hasCauseInstanceOf(RemoteAccessException.class)
			.cause()
			.hasMessageContaining("2 of 2 RDMA READs")
			.hasMessageContaining("failed: WR_FLUSH_ERR")
			.hasMessageNotContaining("did not complete");
		assertThat(counters.bytesRead.sum()).isZero();
	}

	@Test
	void aReceiveThatFailsEndsTheConnectionWithItsStatus() {
		PeerConnection peer = establishedWithOneSend();
		peer.onCompletion(completion(0, WcStatus.LOC_QP_OP_ERR, 0));
		assertThat(peer.failure()).isEqualTo("LOC_QP_OP_ERR");
		assertThat(peer.state()).isEqualTo(ConnectionState.DISCONNECTED);
		assertThat(wakeUps).hasValue(1);
	}

	@Test
	void aFlushedCompletionDoesNotEndTheConnection() {
		PeerConnection peer = establishedWithOneSend();
		peer.onCompletion(completion(PeerConnection.SEND, WcStatus.WR_FLUSH_ERR, 0));
		peer.onCompletion(completion(0, WcStatus.WR_FLUSH_ERR, 0));
		assertThat(peer.failure()).isNull();
		assertThat(ClientTransport.End.failureOf(peer)).isNull();
		assertThat(peer.state()).isEqualTo(ConnectionState.ESTABLISHED);
		assertThat(wakeUps).hasValue(0);
	}

	@Test
	void aFailureAfterThePeerDisconnectedDoesNotEndTheConnectionAgain() {
		PeerConnection peer = establishedWithOneSend();
		peer.peerDisconnected();
		peer.onCompletion(completion(PeerConnection.SEND, WcStatus.RETRY_EXC_ERR, 0));
		assertThat(peer.failure()).isNull();
		assertThat(wakeUps).hasValue(0);
	}

	@Test
	void failedConstructionClosesTheQueuePairAndTheRegions() {
		// send buffers too large for a ByteBuffer view: 2^30 bytes times 2
		ConnectionSettings settings = new ConnectionSettings("orders", false, new InetSocketAddress("10.0.0.2", 7471),
				null, 1, Duration.ofSeconds(5),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 2, Duration.ofSeconds(5), 0), "tx", "rx", 2, 1, 1,
				1 << 30, Duration.ofSeconds(1), false, CmParameters.DEFAULTS, Duration.ofSeconds(5), 4096, null);
		ProtectionDomain pd = mock(ProtectionDomain.class);
		QueuePair qp = mock(QueuePair.class);
		MemoryRegion send = mock(MemoryRegion.class);
		MemoryRegion receive = mock(MemoryRegion.class);
		MemoryRegion access = mock(MemoryRegion.class);
		given(pd.createQueuePair(any())).willReturn(qp);
		given(pd.registerMemory(anyLong(), any())).willReturn(send, receive, access);
		// never read: the view fails on the size alone
		given(send.buffer()).willReturn(MemorySegment.NULL.reinterpret(2L << 30));
		given(receive.buffer()).willReturn(MemorySegment.NULL.reinterpret(1L << 30));
		assertThatIllegalStateException()
			.isThrownBy(() -> new PeerConnection(settings, new ConnectionCounters(),
					new PeerLink.Cm(mock(ConnectionId.class)), pd, mock(CompletionQueue.class),
					mock(CompletionQueue.class), null, List.of(new CompletionRouter("tx"))))
			.withMessageContaining("too large");
		verify(qp).close();
		verify(send).close();
		verify(receive).close();
		verify(access).close();
	}

	/** A listener whose call signals {@code inCall}, then waits for {@code proceed}. */
	private static final class HeldListener {

		final CountDownLatch inCall = new CountDownLatch(1);

		final CountDownLatch proceed = new CountDownLatch(1);

		MessageListenerBinding binding() {
			return new MessageListenerBinding("listener", (message) -> {
				inCall.countDown();
				proceed.await(10, TimeUnit.SECONDS);
			});
		}

	}

	/**
	 * Establishes {@code peer} and hands it a received message on a poller thread;
	 * returns that poller once the listener is in its call.
	 */
	private CompletableFuture<Void> deliverOnPoller(PeerConnection peer, HeldListener held) throws Exception {
		peer.postReceives();
		peer.established();
		WorkCompletion received = completion(0, WcStatus.SUCCESS, 8);
		CompletableFuture<Void> poller = CompletableFuture.runAsync(() -> peer.onCompletion(received), threads);
		assertThat(held.inCall.await(5, TimeUnit.SECONDS)).isTrue();
		return poller;
	}

	/**
	 * Closes {@code peer} on another thread and returns that close once it is waiting
	 * (its QP moved to the error state, still not done 300 ms later, the receive buffers
	 * not destroyed).
	 */
	private CompletableFuture<Boolean> closeWaiting(PeerConnection peer, Duration timeout) throws Exception {
		CompletableFuture<Boolean> close = CompletableFuture
			.supplyAsync(() -> peer.close(timeout, ConnectionState.CLOSED), threads);
		verify(qp, timeout(5000).atLeastOnce()).moveToError();
		Thread.sleep(300);
		assertThat(close).isNotDone();
		verify(receiveRegion, never()).close();
		return close;
	}

	@Test
	void closeWaitsForTheListenerCallBeforeItDestroysTheReceiveBuffers() throws Exception {
		HeldListener held = new HeldListener();
		PeerConnection peer = peer(held.binding());
		// the poller: the listener reads the message in the receive buffer
		CompletableFuture<Void> poller = deliverOnPoller(peer, held);
		CompletableFuture<Boolean> close = closeWaiting(peer, Duration.ofSeconds(2));
		held.proceed.countDown();
		assertThat(close.get(5, TimeUnit.SECONDS)).as("drained in time").isTrue();
		poller.get(5, TimeUnit.SECONDS);
		verify(receiveRegion).close();
	}

	/**
	 * A stop on a poller thread waits for the connection's thread, whose close of a peer
	 * would wait for that poller (here: for its listener call): once the stop takes the
	 * close over, the close stops waiting at once and leaves the destroy to the stopper
	 * ({@link PeerConnection#finishClose()}), while the listener call still runs.
	 */
	@Test
	void aCloseTakenOverStopsWaitingForThePollersAndLeavesTheDestroyToTheStopper() throws Exception {
		HeldListener held = new HeldListener();
		AtomicBoolean stopping = new AtomicBoolean();
		List<PeerConnection> handedOver = new CopyOnWriteArrayList<>();
		PeerConnection peer = peer(held.binding(), (p) -> stopping.get() && handedOver.add(p));
		CompletableFuture<Void> poller = deliverOnPoller(peer, held);
		CompletableFuture<Boolean> close = closeWaiting(peer, Duration.ofSeconds(5));
		stopping.set(true);
		assertThat(close.get(2, TimeUnit.SECONDS)).as("drained").isFalse();
		assertThat(handedOver).containsExactly(peer);
		verify(qp, never()).close();
		verify(receiveRegion, never()).close();
		peer.finishClose();
		verify(qp).close();
		verify(sendRegion).close();
		verify(receiveRegion).close();
		held.proceed.countDown();
		poller.get(5, TimeUnit.SECONDS);
	}

	@Test
	void closeWaitsForARetainedMessageUntilItIsReleased() throws Exception {
		AtomicReference<RdmaMessage> retained = new AtomicReference<>();
		PeerConnection peer = peer(new MessageListenerBinding("listener", (message) -> {
			RdmaMessage m = (RdmaMessage) message;
			m.retain();
			retained.set(m);
		}));
		peer.postReceives();
		peer.established();
		peer.onCompletion(completion(0, WcStatus.SUCCESS, 8));
		assertThat(retained.get()).isNotNull();
		CompletableFuture<Boolean> close = closeWaiting(peer, Duration.ofSeconds(2));
		retained.get().release();
		assertThat(close.get(5, TimeUnit.SECONDS)).as("drained in time").isTrue();
		verify(receiveRegion).close();
	}

	@Test
	void closeWaitsForARetainedMessageNoLongerThanItsTimeout() throws Exception {
		PeerConnection peer = peer(
				new MessageListenerBinding("listener", (message) -> ((RdmaMessage) message).retain()));
		peer.postReceives();
		peer.established();
		peer.onCompletion(completion(0, WcStatus.SUCCESS, 8));
		long start = System.nanoTime();
		assertThat(peer.close(Duration.ofMillis(300), ConnectionState.CLOSED)).as("drained").isFalse();
		assertThat(Duration.ofNanos(System.nanoTime() - start)).isBetween(Duration.ofMillis(250),
				Duration.ofSeconds(3));
		verify(receiveRegion).close();
	}

}
