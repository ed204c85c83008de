package dev.rdma.verbs;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.SendWorkRequest.Flag;
import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDevices;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The data-path verbs of issue 33 on a real device (rxe0 in the Soft-RoCE VM, RC QPs
 * connected to each other on the device's own IPv4-mapped GID): inline sends, selective
 * signaling, chains of work requests with {@code bad_wr}, and shared receive queues with
 * their limit event.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DataPathDeviceTest {

	static final int PORT = LoopbackQueuePair.PORT;

	static final int SLOT = 256;

	static final EnumSet<MemoryRegion.Access> LOCAL = EnumSet.of(MemoryRegion.Access.LOCAL_WRITE);

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	private static void connect(QueuePair a, QueuePair b) {
		a.connect(PORT, device.gidIndex(), device.gid(), b.qpNum());
		b.connect(PORT, device.gidIndex(), device.gid(), a.qpNum());
	}

	/** Polls {@code cq} until {@code n} completions arrived; fails after 10 s. */
	private static List<WorkCompletionSnapshot> completions(CompletionQueue cq, WorkCompletionBuffer buffer, int n,
			String what) {
		return DeviceTestSupport.completions(cq, buffer, n, Duration.ofSeconds(10), what);
	}

	/** Whatever else arrives within {@code millis} ms. */
	private static List<WorkCompletionSnapshot> more(CompletionQueue cq, WorkCompletionBuffer buffer, long millis) {
		List<WorkCompletionSnapshot> out = new ArrayList<>();
		long end = System.nanoTime() + millis * 1_000_000;
		while (System.nanoTime() - end < 0) {
			cq.poll(buffer, wc -> out.add(wc.copy()));
			TwoDevices.pause(5);
		}
		return out;
	}

	private static void fill(MemoryRegion mr, long offset, int length, int seed) {
		for (int i = 0; i < length; i++) {
			mr.buffer().set(JAVA_BYTE, offset + i, (byte) (seed + i * 7));
		}
	}

	private static byte[] expected(int length, int seed) {
		byte[] b = new byte[length];
		for (int i = 0; i < length; i++) {
			b[i] = (byte) (seed + i * 7);
		}
		return b;
	}

	private static byte[] bytes(MemoryRegion mr, long offset, int length) {
		return mr.buffer().asSlice(offset, length).toArray(JAVA_BYTE);
	}

	/**
	 * The receiver has no receive posted, so its first answer is an RNR NAK; the sender's
	 * buffer is overwritten right after the post returned, and the receive is posted only
	 * once the NAK was counted: the retransmission rebuilds the packet from the work
	 * queue. An inline send's payload was copied there at the post and arrives intact; a
	 * send of the same buffer without INLINE rereads the memory region and delivers the
	 * overwritten bytes (the control that shows the test can fail).
	 */
	@Test
	void anInlineSendWhoseBufferIsOverwrittenRightAfterThePostArrivesIntact() {
		try (CompletionQueue cq = ctx().createCompletionQueue(32, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			MemoryRegion mr = pd.registerMemory(4L * SLOT, LOCAL);
			QueuePair sender = pd
				.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, false).withMaxInlineData(SLOT / 2));
			QueuePair receiver = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, false));
			assertThat(sender.maxInlineData()).as("max_inline_data granted").isGreaterThanOrEqualTo(SLOT / 2);
			assertThat(sender.capabilities().maxSendWr()).isGreaterThanOrEqualTo(4);
			QueuePair.Capabilities queried = sender.queryCapabilities();
			System.out.println("granted " + sender.capabilities() + ", ibv_query_qp " + queried);
			assertThat(queried.maxInlineData()).as("ibv_query_qp's max_inline_data").isGreaterThanOrEqualTo(SLOT / 2);
			assertThat(queried.maxSendWr()).isGreaterThanOrEqualTo(4);
			assertThat(receiver.maxInlineData()).isGreaterThanOrEqualTo(0);
			connect(sender, receiver);
			int length = 64;
			SendWorkRequest send = new SendWorkRequest().buffer(mr, 0, length);

			assertThatThrownBy(() -> sender.postSend(new SendWorkRequest().wrId(9)
				.buffer(mr, 0, sender.maxInlineData() + 1)
				.flags(Flag.SIGNALED, Flag.INLINE))).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("exceeds max_inline_data " + sender.maxInlineData());

			byte[] inline = sendOverwriteAndReceive(cq, buffer, mr, sender, receiver,
					send.wrId(1).flags(Flag.SIGNALED, Flag.INLINE), length);
			assertThat(inline).as("the inline send's payload").isEqualTo(expected(length, 1));
			byte[] plain = sendOverwriteAndReceive(cq, buffer, mr, sender, receiver, send.wrId(2).flags(Flag.SIGNALED),
					length);
			assertThat(plain).as("the same send without INLINE rereads the overwritten buffer")
				.isEqualTo(expected(length, 2 + 100));
		}
	}

	private static byte[] sendOverwriteAndReceive(CompletionQueue cq, WorkCompletionBuffer buffer, MemoryRegion mr,
			QueuePair sender, QueuePair receiver, SendWorkRequest send, int length) {
		int seed = (int) send.wrId();
		fill(mr, 0, length, seed);
		long naks = TwoDevices.hwCounter(ctx().deviceName(), "send_rnr_err");
		sender.postSend(send);
		fill(mr, 0, length, seed + 100);
		DeviceTestSupport.await(Duration.ofSeconds(5),
				() -> TwoDevices.hwCounter(ctx().deviceName(), "send_rnr_err") > naks,
				"an RNR NAK for the send without a receive");
		receiver.postRecv(new ReceiveWorkRequest().wrId(100 + seed).buffer(mr, 2L * SLOT, SLOT));
		List<WorkCompletionSnapshot> wcs = completions(cq, buffer, 2, "the send and its receive");
		assertThat(wcs).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
		assertThat(wcs).extracting(WorkCompletionSnapshot::wrId).containsExactlyInAnyOrder((long) seed, 100L + seed);
		return bytes(mr, 2L * SLOT, length);
	}

	/**
	 * A QP created without {@code sq_sig_all}: 32 sends posted as one chain, one in four
	 * SIGNALED, give exactly eight send completions (those of the signaled ones) while
	 * all 32 messages arrive; the 32 receives went in as one chain too.
	 */
	@Test
	void withSignalingEveryKTheCqHoldsOneSendCompletionPerKSends() {
		int n = 32;
		int k = 4;
		try (CompletionQueue sendCq = ctx().createCompletionQueue(64, null, 0);
				CompletionQueue recvCq = ctx().createCompletionQueue(64, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			MemoryRegion mr = pd.registerMemory(2L * n * 64, LOCAL);
			QueuePair sender = pd.createQueuePair(new QueuePair.Attributes(sendCq, sendCq, n, 1, false));
			QueuePair receiver = pd.createQueuePair(new QueuePair.Attributes(recvCq, recvCq, 1, n, false));
			connect(sender, receiver);
			List<ReceiveWorkRequest> receives = new ArrayList<>();
			List<SendWorkRequest> sends = new ArrayList<>();
			for (int i = 0; i < n; i++) {
				receives.add(new ReceiveWorkRequest().wrId(1000 + i).buffer(mr, (long) (n + i) * 64, 64));
				fill(mr, (long) i * 64, 64, i);
				SendWorkRequest s = new SendWorkRequest().wrId(i).buffer(mr, (long) i * 64, 64);
				sends.add(i % k == k - 1 ? s.flags(Flag.SIGNALED) : s.flags());
			}
			receiver.postRecv(receives);
			sender.postSend(sends);
			List<WorkCompletionSnapshot> received = completions(recvCq, buffer, n, n + " receives");
			assertThat(received).extracting(WorkCompletionSnapshot::wrId)
				.containsExactlyElementsOf(receives.stream().map(ReceiveWorkRequest::wrId).toList());
			for (int i = 0; i < n; i++) {
				assertThat(bytes(mr, (long) (n + i) * 64, 64)).isEqualTo(expected(64, i));
			}
			List<WorkCompletionSnapshot> signaled = completions(sendCq, buffer, n / k, "the signaled sends");
			signaled.addAll(more(sendCq, buffer, 100));
			assertThat(signaled).extracting(WorkCompletionSnapshot::wrId)
				.containsExactly(3L, 7L, 11L, 15L, 19L, 23L, 27L, 31L);
			assertThat(signaled).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
		}
	}

	/**
	 * A chain of 64 sends on a QP asked for 8: the provider refuses the first element
	 * that finds the queue full (at or after the granted max_send_wr); the exception
	 * names it, the elements before it are posted (each arrives), the ones after it are
	 * not (no more arrive). A chain whose third element has no buffer is refused before
	 * anything is posted.
	 */
	@Test
	void aChainWithARefusedElementInTheMiddleReportsItAndPostsNothingAfterIt() {
		try (CompletionQueue sendCq = ctx().createCompletionQueue(128, null, 0);
				CompletionQueue recvCq = ctx().createCompletionQueue(128, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			QueuePair sender = pd.createQueuePair(new QueuePair.Attributes(sendCq, sendCq, 8, 1, true));
			int depth = sender.capabilities().maxSendWr();
			// longer than any queue the provider makes of 8 (rxe rounds its ring up to a
			// power of two: the granted max_send_wr is a lower bound of what fits)
			int n = 64;
			QueuePair receiver = pd.createQueuePair(new QueuePair.Attributes(recvCq, recvCq, 1, n, true));
			MemoryRegion mr = pd.registerMemory(2L * n * 32, LOCAL);
			connect(sender, receiver);
			List<ReceiveWorkRequest> receives = new ArrayList<>();
			List<SendWorkRequest> sends = new ArrayList<>();
			for (int i = 0; i < n; i++) {
				receives.add(new ReceiveWorkRequest().wrId(1000 + i).buffer(mr, (long) (n + i) * 32, 32));
				sends.add(new SendWorkRequest().wrId(i).buffer(mr, (long) i * 32, 32));
			}
			receiver.postRecv(receives);

			List<SendWorkRequest> unchecked = List.of(sends.get(0), sends.get(1), new SendWorkRequest().wrId(77),
					sends.get(3));
			assertThatThrownBy(() -> sender.postSend(unchecked)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("has no buffer")
				.hasMessageContaining("element 2 of the chain");
			assertThatThrownBy(() -> sender.postSend(List.of(sends.get(0), sends.get(0))))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("another post is using it");

			ChainPostException refused = (ChainPostException) org.assertj.core.api.Assertions
				.catchThrowable(() -> sender.postSend(sends));
			assertThat(refused).as("the post of %d sends on a queue of %d", n, depth).isNotNull();
			System.out.println(refused.getMessage());
			int posted = refused.failedIndex();
			assertThat(posted).as("the refused element").isGreaterThanOrEqualTo(depth).isLessThan(n);
			assertThat(refused.postedCount()).isEqualTo(posted);
			assertThat(refused.failedWrId()).isEqualTo(posted);
			assertThat(refused.chainLength()).isEqualTo(n);
			assertThat(refused.verb()).isEqualTo("ibv_post_send");
			assertThat(Math.abs(refused.errno())).isEqualTo(Errno.ENOMEM);

			List<WorkCompletionSnapshot> sent = completions(sendCq, buffer, posted, posted + " sends");
			List<WorkCompletionSnapshot> received = completions(recvCq, buffer, posted, posted + " receives");
			sent.addAll(more(sendCq, buffer, 100));
			received.addAll(more(recvCq, buffer, 0));
			assertThat(sent).extracting(WorkCompletionSnapshot::wrId)
				.containsExactlyElementsOf(sends.subList(0, posted).stream().map(SendWorkRequest::wrId).toList());
			assertThat(received).hasSize(posted).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
			// the chain was unlinked: its elements post again one by one
			sender.postSend(sends.get(posted));
			assertThat(completions(recvCq, buffer, 1, "the refused element posted alone")).hasSize(1);
		}
	}

	/**
	 * Two QPs receive from one SRQ: 8 receives posted as one chain, the limit armed at 4;
	 * five messages take it below, which raises SRQ_LIMIT_REACHED on the SRQ through the
	 * context's async events and disarms the limit; the SRQ is refilled and six more
	 * messages arrive. Every receive completion names the QP its sender is connected to.
	 */
	@Test
	void qpsOnOneSharedReceiveQueueReceiveItsBuffersAndItsLimitEventTriggersTheRefill() {
		try (CompletionQueue sendCq = ctx().createCompletionQueue(64, null, 0);
				CompletionQueue recvCq = ctx().createCompletionQueue(64, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			MemoryRegion mr = pd.registerMemory(32L * SLOT, LOCAL);
			SharedReceiveQueue srq = pd.createSharedReceiveQueue(16);
			assertThat(pd.sharedReceiveQueues()).containsExactly(srq);
			assertThat(srq.createdAttributes().maxWr()).isGreaterThanOrEqualTo(16);
			QueuePair.Attributes onSrq = new QueuePair.Attributes(recvCq, recvCq, 4, 0, false)
				.withSharedReceiveQueue(srq);
			QueuePair r1 = pd.createQueuePair(onSrq);
			QueuePair r2 = pd.createQueuePair(onSrq);
			assertThat(srq.queuePairs()).containsExactly(r1, r2);
			QueuePair s1 = pd.createQueuePair(new QueuePair.Attributes(sendCq, sendCq, 8, 1, true));
			QueuePair s2 = pd.createQueuePair(new QueuePair.Attributes(sendCq, sendCq, 8, 1, true));
			connect(s1, r1);
			connect(s2, r2);
			assertThatThrownBy(() -> r1.postRecv(new ReceiveWorkRequest().buffer(mr, 0, SLOT)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("ibv_post_srq_recv");

			srq.postRecv(receives(mr, 0, 8));
			srq.armLimit(4);
			assertThat(srq.query().limit()).isEqualTo(4);
			while (ctx().getAsyncEvent(Duration.ZERO) != null) {
				// events of earlier tests
			}
			List<WorkCompletionSnapshot> wcs = new ArrayList<>();
			send(s1, mr, 1, 3);
			send(s2, mr, 2, 2);
			wcs.addAll(completions(recvCq, buffer, 5, "5 receives from the SRQ"));
			AsyncEvent event = null;
			long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
			while (event == null && System.nanoTime() - deadline < 0) {
				AsyncEvent e = ctx().getAsyncEvent(Duration.ofMillis(200));
				if (e != null && e.type() == AsyncEventType.SRQ_LIMIT_REACHED) {
					event = e;
				}
			}
			assertThat(event).as("SRQ_LIMIT_REACHED").isNotNull();
			assertThat(event.sharedReceiveQueue()).isSameAs(srq);
			assertThat(event.elementAddress()).isEqualTo(srq.address());
			assertThat(srq.limitEvents()).isEqualTo(1);
			assertThat(srq.query().limit()).as("the limit disarmed by the event").isZero();

			srq.postRecv(receives(mr, 8, 8));
			send(s1, mr, 1, 3);
			send(s2, mr, 2, 3);
			wcs.addAll(completions(recvCq, buffer, 6, "6 receives after the refill"));
			assertThat(wcs).hasSize(11).allSatisfy(wc -> {
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				int sender = mr.buffer().get(JAVA_BYTE, (wc.wrId() - 1000) * SLOT);
				assertThat(wc.qpNum()).as("qp_num of a message of sender %d", sender)
					.isEqualTo(sender == 1 ? r1.qpNum() : r2.qpNum());
			});
			assertThat(wcs).filteredOn(wc -> wc.qpNum() == r1.qpNum()).hasSize(6);
			completions(sendCq, buffer, 11, "11 sends");

			assertThatThrownBy(srq::close).isInstanceOf(VerbsException.class).hasMessageContaining("EBUSY");
			r1.close();
			r2.close();
			srq.close();
			srq.close();
			assertThat(srq.isClosed()).isTrue();
			assertThat(pd.sharedReceiveQueues()).isEmpty();
			assertThatThrownBy(() -> srq.postRecv(new ReceiveWorkRequest().buffer(mr, 0, SLOT)))
				.isInstanceOf(IllegalStateException.class);
		}
	}

	/** The PD closes its QPs first, then the SRQ they use, then itself. */
	@Test
	void closingTheProtectionDomainClosesTheQpsBeforeTheirSharedReceiveQueue() {
		try (CompletionQueue cq = ctx().createCompletionQueue(8, null, 0)) {
			ProtectionDomain pd = ctx().allocateProtectionDomain();
			SharedReceiveQueue srq = pd.createSharedReceiveQueue(4);
			QueuePair qp = pd
				.createQueuePair(new QueuePair.Attributes(cq, cq, 2, 0, false).withSharedReceiveQueue(srq));
			pd.close();
			assertThat(qp.isClosed()).isTrue();
			assertThat(srq.isClosed()).isTrue();
			assertThat(pd.isClosed()).isTrue();
		}
	}

	private static List<ReceiveWorkRequest> receives(MemoryRegion mr, int first, int n) {
		List<ReceiveWorkRequest> out = new ArrayList<>();
		for (int i = first; i < first + n; i++) {
			out.add(new ReceiveWorkRequest().wrId(1000 + i).buffer(mr, (long) i * SLOT, SLOT));
		}
		return out;
	}

	private static void send(QueuePair qp, MemoryRegion mr, int sender, int count) {
		long at = 16L * SLOT + sender * SLOT;
		mr.buffer().set(JAVA_BYTE, at, (byte) sender);
		for (int i = 0; i < count; i++) {
			qp.postSend(new SendWorkRequest().wrId(sender * 100 + i).buffer(mr, at, 16));
		}
	}

}
