package dev.rdma.verbs;

import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;

import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * UD queue pairs and address handles, RC connection parameters and the safety of posting,
 * on a real device (rxe0 in the Soft-RoCE VM): every datagram goes to the device's own
 * IPv4-mapped GID.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class QueuePairDeviceTest {

	static final int PORT = LoopbackQueuePair.PORT;
	static final int QKEY = 0x11111111;
	static final int SLOT = 512;
	static final int IMM = 0xCAFE0001;
	static final EnumSet<MemoryRegion.Access> LOCAL = EnumSet.of(MemoryRegion.Access.LOCAL_WRITE);

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	private static Context ctx() {
		return device.context();
	}

	private static QueuePair udQp(ProtectionDomain pd, CompletionQueue sendCq, CompletionQueue recvCq) {
		QueuePair qp = pd
			.createQueuePair(new QueuePair.Attributes(sendCq, recvCq, 8, 8, false).withType(QueuePair.Type.UD));
		assertThat(qp.type()).isEqualTo(QueuePair.Type.UD);
		assertThat(qp.state()).isEqualTo(QueuePair.State.RESET);
		qp.activate(PORT, QKEY);
		assertThat(qp.state()).isEqualTo(QueuePair.State.RTS);
		return qp;
	}

	private static AddressHandle selfAddress(ProtectionDomain pd) {
		return pd.createAddressHandle(AddressHandle.Attributes.global(PORT, device.gid(), device.gidIndex()));
	}

	/** Polls {@code cq} until {@code n} completions arrived; fails after 20 s. */
	private static List<WorkCompletionSnapshot> completions(CompletionQueue cq, WorkCompletionBuffer buffer, int n,
			String what) {
		return DeviceTestSupport.completions(cq, buffer, n, Duration.ofSeconds(20), what);
	}

	private static Map<Long, WorkCompletionSnapshot> byWrId(List<WorkCompletionSnapshot> wcs) {
		return wcs.stream().collect(Collectors.toMap(WorkCompletionSnapshot::wrId, Function.identity()));
	}

	private static void fill(MemoryRegion mr, long offset, int length, int seed) {
		for (int i = 0; i < length; i++) {
			mr.buffer().set(JAVA_BYTE, offset + i, (byte) (seed + i * 7));
		}
	}

	private static byte[] bytes(MemoryRegion mr, long offset, int length) {
		return mr.buffer().asSlice(offset, length).toArray(JAVA_BYTE);
	}

	@Test
	void udSendAndSendWithImmThroughAnAddressHandleOnALegacyCq() {
		udTraffic(ctx().createCompletionQueue(64, null, 0));
	}

	@Test
	void udSendAndSendWithImmThroughAnAddressHandleOnAnExtendedCq() {
		udTraffic(ctx().createExtendedCompletionQueue(CqInitAttributes.of(64)
			.withWcFlags(EnumSet.of(WcExFlag.SRC_QP, WcExFlag.BYTE_LEN, WcExFlag.IMM, WcExFlag.QP_NUM))));
	}

	private void udTraffic(CompletionQueue recvCq) {
		try (recvCq;
				CompletionQueue sendCq = ctx().createCompletionQueue(64, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			MemoryRegion mr = pd.registerMemory(4L * SLOT, LOCAL);
			QueuePair sender = udQp(pd, sendCq, sendCq);
			QueuePair receiver = udQp(pd, recvCq, recvCq);
			AddressHandle ah = selfAddress(pd);
			assertThat(pd.addressHandles()).containsExactly(ah);
			int[] lengths = { 100, 200 };
			for (int i = 0; i < 2; i++) {
				receiver.postRecv(new ReceiveWorkRequest().wrId(10 + i).buffer(mr, (2L + i) * SLOT, SLOT)); // receive
																											// slots
																											// 2,
				// 3: GRH, then
				// payload
			}
			fill(mr, 0, lengths[0], 1);
			fill(mr, SLOT, lengths[1], 2);
			sender.postSend(
					new SendWorkRequest().wrId(20).buffer(mr, 0, lengths[0]).datagram(ah, receiver.qpNum(), QKEY));
			sender.postSend(new SendWorkRequest().wrId(21)
				.buffer(mr, SLOT, lengths[1])
				.opcode(SendOpcode.SEND_WITH_IMM)
				.immediateData(IMM)
				.datagram(ah, receiver.qpNum(), QKEY));

			List<WorkCompletionSnapshot> sends = completions(sendCq, buffer, 2, "2 UD send completions");
			assertThat(sends).extracting(WorkCompletionSnapshot::wrId).containsExactly(20L, 21L);
			assertThat(sends).allSatisfy(wc -> {
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.opcode()).isEqualTo(WcOpcode.SEND);
				assertThat(wc.qpNum()).isEqualTo(sender.qpNum());
			});

			List<WorkCompletionSnapshot> recvs = completions(recvCq, buffer, 2, "2 UD receive completions");
			assertThat(recvs).extracting(WorkCompletionSnapshot::wrId).containsExactly(10L, 11L);
			for (int i = 0; i < 2; i++) {
				WorkCompletionSnapshot wc = recvs.get(i);
				assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
				assertThat(wc.opcode()).isEqualTo(WcOpcode.RECV);
				assertThat(wc.qpNum()).isEqualTo(receiver.qpNum());
				assertThat(wc.srcQp()).as("src_qp").isEqualTo(sender.qpNum());
				assertThat(wc.hasFlag(WcFlag.GRH)).as("every UD receive on RoCE has a GRH").isTrue();
				assertThat(wc.byteLen()).as("byte_len counts the GRH").isEqualTo(lengths[i] + QueuePair.GRH_BYTES);
				assertThat(wc.hasFlag(WcFlag.WITH_IMM)).isEqualTo(i == 1);
				long at = (2L + i) * SLOT;
				assertThat(bytes(mr, at + QueuePair.GRH_BYTES, lengths[i])).as("payload after the GRH")
					.isEqualTo(bytes(mr, (long) i * SLOT, lengths[i]));
				// RoCE v2 over IPv4: the last 20 bytes of the GRH are the packet's IPv4
				// header (version 4, IHL 5)
				assertThat(mr.buffer().get(JAVA_BYTE, at + 20)).as("IPv4 header in the GRH").isEqualTo((byte) 0x45);
			}
			assertThat(recvs.get(1).immData()).isEqualTo(IMM);
			assertThat(sendCq.poll(buffer)).isZero();
			assertThat(recvCq.poll(buffer)).isZero();
		}
	}

	@Test
	void oneCqSharedByAnRcAndAUdQpGetsTheCompletionsOfBoth() {
		try (CompletionQueue cq = ctx().createCompletionQueue(64, null, 0);
				Loopback rc = new Loopback(ctx(), cq, cq, 8, 128);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			assertThat(rc.qp().type()).as("the five-argument Attributes make an RC QP").isEqualTo(QueuePair.Type.RC);
			MemoryRegion mr = pd.registerMemory(2L * SLOT, LOCAL);
			QueuePair ud = udQp(pd, cq, cq);
			AddressHandle ah = selfAddress(pd);
			rc.postRecv(1, 0);
			ud.postRecv(new ReceiveWorkRequest().wrId(11).buffer(mr, SLOT, SLOT));
			fill(mr, 0, 64, 3);
			rc.postSend(2, 0, 32, 0x77);
			ud.postSend(new SendWorkRequest().wrId(12).buffer(mr, 0, 64).datagram(ah, ud.qpNum(), QKEY)); // to
			// itself

			Map<Long, WorkCompletionSnapshot> wcs = byWrId(completions(cq, buffer, 4, "4 completions"));
			assertThat(wcs.keySet()).containsExactlyInAnyOrder(1L, 2L, 11L, 12L);
			assertThat(wcs.values()).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
			assertThat(wcs.get(1L).opcode()).isEqualTo(WcOpcode.RECV);
			assertThat(wcs.get(1L).qpNum()).isEqualTo(rc.qp().qpNum());
			assertThat(wcs.get(1L).immData()).isEqualTo(0x77);
			assertThat(wcs.get(2L).opcode()).isEqualTo(WcOpcode.SEND);
			assertThat(wcs.get(2L).qpNum()).isEqualTo(rc.qp().qpNum());
			assertThat(wcs.get(11L).opcode()).isEqualTo(WcOpcode.RECV);
			assertThat(wcs.get(11L).qpNum()).isEqualTo(ud.qpNum());
			assertThat(wcs.get(11L).srcQp()).isEqualTo(ud.qpNum());
			assertThat(wcs.get(11L).hasFlag(WcFlag.GRH)).isTrue();
			assertThat(wcs.get(11L).byteLen()).isEqualTo(64 + QueuePair.GRH_BYTES);
			assertThat(bytes(mr, SLOT + QueuePair.GRH_BYTES, 64)).isEqualTo(bytes(mr, 0, 64));
			assertThat(wcs.get(12L).opcode()).isEqualTo(WcOpcode.SEND);
			assertThat(wcs.get(12L).qpNum()).isEqualTo(ud.qpNum());
			assertThat(cq.poll(buffer)).isZero();
		}
	}

	@Test
	void aSendWithoutAReceiveFailsWithRnrRetryExceededWhenRnrRetryIsZero() {
		try (CompletionQueue cq = ctx().createCompletionQueue(16, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
			MemoryRegion mr = pd.registerMemory(SLOT, LOCAL);
			QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, false));
			qp.connect(PORT, device.gidIndex(), device.gid(), qp.qpNum(),
					ConnectionParameters.DEFAULTS.withRnrRetry(0).withMinRnrTimer(1));
			assertThat(qp.state()).isEqualTo(QueuePair.State.RTS);
			qp.postSend(new SendWorkRequest().wrId(1).buffer(mr, 0, 16));
			WorkCompletionSnapshot wc = completions(cq, buffer, 1, "the failed send").getFirst();
			assertThat(wc.wrId()).isEqualTo(1);
			assertThat(wc.status()).isEqualTo(WcStatus.RNR_RETRY_EXC_ERR);
			assertThat(wc.qpNum()).isEqualTo(qp.qpNum());
		}
	}

	@Test
	void nonDefaultConnectionParametersCarryAMultiPacketMessageAcrossThePsnWrap() {
		// a 1024-byte path MTU makes 3 packets of 3000 bytes, whose PSNs wrap from
		// 0xFFFFFF to 0
		ConnectionParameters parameters = ConnectionParameters.DEFAULTS.withPathMtu(1024)
			.withSqPsn(ConnectionParameters.MAX_PSN - 1)
			.withRqPsn(ConnectionParameters.MAX_PSN - 1)
			.withTimeout(18)
			.withRetryCount(3)
			.withRnrRetry(6)
			.withMinRnrTimer(5)
			.withMaxRdAtomic(4)
			.withMaxDestRdAtomic(4)
			.withHopLimit(64);
		try (CompletionQueue cq = ctx().createCompletionQueue(16, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
			MemoryRegion mr = pd.registerMemory(8192, LOCAL);
			QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, false));
			qp.connect(PORT, device.gidIndex(), device.gid(), qp.qpNum(), parameters);
			qp.postRecv(new ReceiveWorkRequest().wrId(1).buffer(mr, 4096, 4096));
			fill(mr, 0, 3000, 9);
			qp.postSend(new SendWorkRequest().wrId(2).buffer(mr, 0, 3000));
			Map<Long, WorkCompletionSnapshot> wcs = byWrId(completions(cq, buffer, 2, "send and receive"));
			assertThat(wcs.values()).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
			assertThat(wcs.get(1L).byteLen()).isEqualTo(3000);
			assertThat(bytes(mr, 4096, 3000)).isEqualTo(bytes(mr, 0, 3000));
		}
	}

	@Test
	@SuppressWarnings("try") // close() called inside try-with-resources on purpose: it
								// must be idempotent
	void aClosedMemoryRegionOrAddressHandleIsRefusedAndNothingIsPosted() throws Exception {
		try (CompletionQueue cq = ctx().createCompletionQueue(64, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				ProtectionDomain otherPd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(16)) {
			MemoryRegion mr = pd.registerMemory(4L * SLOT, LOCAL);
			MemoryRegion closedMr = pd.registerMemory(4L * SLOT, LOCAL);
			QueuePair ud = udQp(pd, cq, cq);
			QueuePair rc = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 8, 8, false));
			rc.connect(PORT, device.gidIndex(), device.gid(), rc.qpNum(),
					ConnectionParameters.DEFAULTS.withRnrRetry(0));
			AddressHandle ah = selfAddress(pd);
			AddressHandle closedAh = selfAddress(pd);
			AddressHandle foreignAh = selfAddress(otherPd);
			closedMr.close();
			closedAh.close();
			assertThat(pd.addressHandles()).containsExactly(ah);

			assertThatThrownBy(() -> ud.postRecv(new ReceiveWorkRequest().wrId(1).buffer(closedMr, 0, SLOT)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("MemoryRegion")
				.hasMessageContaining("closed");
			assertThatThrownBy(() -> ud
				.postSend(new SendWorkRequest().wrId(2).buffer(closedMr, 0, 16).datagram(ah, ud.qpNum(), QKEY)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("MemoryRegion");
			assertThatThrownBy(() -> ud
				.postSend(new SendWorkRequest().wrId(3).buffer(mr, 0, 16).datagram(closedAh, ud.qpNum(), QKEY)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("AddressHandle")
				.hasMessageContaining("closed");
			assertThatThrownBy(() -> rc.postRecv(new ReceiveWorkRequest().wrId(4).buffer(closedMr, 0, SLOT)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("MemoryRegion");
			assertThatThrownBy(() -> rc.postSend(new SendWorkRequest().wrId(5).buffer(closedMr, 0, 16)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("MemoryRegion");
			// the wrong kind of QP for the verb, an address handle of another PD, an
			// opcode UD cannot send
			assertThatThrownBy(() -> ud.postSend(new SendWorkRequest().wrId(6).buffer(mr, 0, 16)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("AddressHandle");
			assertThatThrownBy(
					() -> rc.postSend(new SendWorkRequest().wrId(7).buffer(mr, 0, 16).datagram(ah, rc.qpNum(), QKEY)))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("RC");
			assertThatThrownBy(() -> ud
				.postSend(new SendWorkRequest().wrId(8).buffer(mr, 0, 16).datagram(foreignAh, ud.qpNum(), QKEY)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("protection domain");
			assertThatThrownBy(() -> ud.postSend(new SendWorkRequest().wrId(9)
				.buffer(mr, 0, 16)
				.opcode(SendOpcode.RDMA_WRITE)
				.datagram(ah, ud.qpNum(), QKEY))).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("RDMA_WRITE");
			assertThatThrownBy(() -> ud.connect(PORT, device.gidIndex(), device.gid(), ud.qpNum()))
				.isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("activate");
			assertThatThrownBy(() -> rc.activate(PORT, QKEY)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("connect");

			// nothing was posted: no completion appears, and the next receives take the
			// next sends
			Thread.sleep(300);
			assertThat(cq.poll(buffer)).as("completions of refused posts").isZero();
			ud.postRecv(new ReceiveWorkRequest().wrId(10).buffer(mr, 2L * SLOT, SLOT));
			rc.postRecv(new ReceiveWorkRequest().wrId(12).buffer(mr, 3L * SLOT, SLOT));
			ud.postSend(new SendWorkRequest().wrId(11).buffer(mr, 0, 16).datagram(ah, ud.qpNum(), QKEY));
			rc.postSend(new SendWorkRequest().wrId(13).buffer(mr, SLOT, 16));
			Map<Long, WorkCompletionSnapshot> wcs = byWrId(completions(cq, buffer, 4, "the valid posts"));
			assertThat(wcs.keySet()).containsExactlyInAnyOrder(10L, 11L, 12L, 13L);
			assertThat(wcs.values()).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
			Thread.sleep(100);
			assertThat(cq.poll(buffer)).isZero();

			// closing the PD closes its QPs, then its address handles, then its MRs
			pd.close();
			assertThat(ud.isClosed()).isTrue();
			assertThat(ah.isClosed()).isTrue();
			assertThat(mr.isClosed()).isTrue();
			assertThat(foreignAh.isClosed()).isFalse();
		}
	}

	/**
	 * Out-of-range arguments end in an exception before any call, and the QP is
	 * unchanged: a 25-bit or negative destination QP number (ibv_modify_qp would have
	 * taken its low 24 bits) leaves the QP in RESET; a post at an offset near
	 * Long.MAX_VALUE (offset + length overflowed the range check, the post went through
	 * and the QP failed with a local protection error) posts nothing and leaves the QP in
	 * RTS; a 25-bit remote QPN of a UD send posts nothing.
	 */
	@Test
	void outOfRangeQpNumbersAndOffsetsAreRefusedBeforeAnyCall() throws Exception {
		try (CompletionQueue cq = ctx().createCompletionQueue(16, null, 0);
				ProtectionDomain pd = ctx().allocateProtectionDomain();
				WorkCompletionBuffer buffer = new WorkCompletionBuffer(4)) {
			MemoryRegion mr = pd.registerMemory(SLOT, LOCAL);
			QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, false));
			for (int bad : new int[] { QueuePair.MAX_QP_NUM + 1, -1 }) {
				assertThatThrownBy(() -> qp.connect(PORT, device.gidIndex(), device.gid(), bad))
					.isInstanceOf(IllegalArgumentException.class)
					.hasMessageStartingWith("destQpNum (dest_qp_num) must be 0..16777215, got " + bad);
				assertThatThrownBy(
						() -> qp.connect(PORT, device.gidIndex(), device.gid(), 0, bad, ConnectionParameters.DEFAULTS))
					.isInstanceOf(IllegalArgumentException.class)
					.hasMessageStartingWith("destQpNum (dest_qp_num)");
			}
			assertThat(qp.state()).isEqualTo(QueuePair.State.RESET);
			// a RoCE peer without a GID (e.g. a record of ibv_rc_pingpong run without
			// -g):
			// refused naming the GID and the link layer, before ibv_modify_qp's EINVAL
			for (Gid none : new Gid[] { null, new Gid(new byte[16]) }) {
				assertThatThrownBy(
						() -> qp.connect(PORT, device.gidIndex(), none, 0, qp.qpNum(), ConnectionParameters.DEFAULTS))
					.isInstanceOf(IllegalArgumentException.class)
					.hasMessageStartingWith("destGid is " + (none == null ? "null" : "all zero"))
					.hasMessageContaining(ctx().deviceName() + " port " + PORT + " is RoCE (link layer ETHERNET)");
			}
			// RDMA read depths above the device's: refused naming the parameter and
			// the limit (ibv_modify_qp's EINVAL came after RTR, leaving the QP there)
			DeviceAttributes limits = ctx().queryDevice();
			assertThatThrownBy(() -> qp.connect(PORT, device.gidIndex(), device.gid(), qp.qpNum(),
					ConnectionParameters.DEFAULTS.withMaxRdAtomic(limits.maxQpInitRdAtom() + 1)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessage("maxRdAtomic (max_rd_atomic) " + (limits.maxQpInitRdAtom() + 1)
						+ " exceeds max_qp_init_rd_atom " + limits.maxQpInitRdAtom() + " of " + ctx().deviceName()
						+ " (ibv_query_device)");
			assertThatThrownBy(() -> qp.connect(PORT, device.gidIndex(), device.gid(), qp.qpNum(),
					ConnectionParameters.DEFAULTS.withMaxDestRdAtomic(limits.maxQpRdAtom() + 1)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageStartingWith("maxDestRdAtomic (max_dest_rd_atomic) " + (limits.maxQpRdAtom() + 1)
						+ " exceeds max_qp_rd_atom " + limits.maxQpRdAtom());
			assertThat(qp.state()).as("nothing changed on the QP").isEqualTo(QueuePair.State.RESET);
			qp.connect(PORT, device.gidIndex(), device.gid(), qp.qpNum());

			long far = Long.MAX_VALUE - 10;
			assertThatThrownBy(() -> qp.postSend(new SendWorkRequest().wrId(1).buffer(mr, far, 64)))
				.isInstanceOf(IndexOutOfBoundsException.class)
				.hasMessageContaining("offset " + far + " + length 64 outside the " + SLOT + "-byte memory region");
			assertThatThrownBy(() -> qp.postRecv(new ReceiveWorkRequest().wrId(2).buffer(mr, far, 64)))
				.isInstanceOf(IndexOutOfBoundsException.class);
			assertThatThrownBy(() -> qp.postSend(new SendWorkRequest().wrId(3)
				.buffer(mr, far, 64)
				.opcode(SendOpcode.RDMA_WRITE)
				.remote(mr.bufferAddress(), mr.rkey()))).isInstanceOf(IndexOutOfBoundsException.class);

			QueuePair ud = udQp(pd, cq, cq);
			AddressHandle ah = selfAddress(pd);
			assertThatThrownBy(() -> ud
				.postSend(new SendWorkRequest().wrId(4).buffer(mr, 0, 16).datagram(ah, QueuePair.MAX_QP_NUM + 1, QKEY)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageStartingWith("remoteQpn (remote_qpn)");
			assertThatThrownBy(
					() -> ud.postSend(new SendWorkRequest().wrId(5).buffer(mr, far, 16).datagram(ah, ud.qpNum(), QKEY)))
				.isInstanceOf(IndexOutOfBoundsException.class);

			Thread.sleep(300);
			assertThat(cq.poll(buffer)).as("completions of refused posts").isZero();
			assertThat(qp.state()).isEqualTo(QueuePair.State.RTS);
			assertThat(ud.state()).isEqualTo(QueuePair.State.RTS);
			qp.postRecv(new ReceiveWorkRequest().wrId(6).buffer(mr, SLOT / 2, SLOT / 2));
			qp.postSend(new SendWorkRequest().wrId(7).buffer(mr, 0, 16));
			Map<Long, WorkCompletionSnapshot> wcs = byWrId(completions(cq, buffer, 2, "the valid posts"));
			assertThat(wcs.keySet()).containsExactlyInAnyOrder(6L, 7L);
			assertThat(wcs.values()).allSatisfy(wc -> assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS));
		}
	}

	@Test
	void createAhErrorsNameTheVerb() {
		try (ProtectionDomain pd = ctx().allocateProtectionDomain()) {
			int beyond = ctx().queryPort(PORT).gidTableLength();
			VerbsException e = null;
			try {
				pd.createAddressHandle(AddressHandle.Attributes.global(PORT, device.gid(), Math.min(beyond, 255)))
					.close();
			}
			catch (VerbsException expected) {
				e = expected;
			}
			assertThat(e).as("ibv_create_ah with a source GID index past the table").isNotNull();
			assertThat(e.verb()).isEqualTo("ibv_create_ah");
			assertThat(pd.addressHandles()).isEmpty();
		}
	}

}
