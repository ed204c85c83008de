package dev.rdma.verbs;

import dev.rdma.verbs.QueuePair.SendOpcode;
import dev.rdma.verbs.ffm.Layouts;

import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The work requests without a device: their defaults, setters, the native structs they
 * fill, and the claim that keeps two posts (or a post and a close) off one work request.
 * Posting itself is {@code QueuePairDeviceTest}'s.
 */
class WorkRequestTest {

	@Test
	void aNewSendIsASignaledSendWithoutBufferAsPyverbsMakesIt() {
		try (SendWorkRequest wr = new SendWorkRequest()) {
			assertThat(wr.opcode()).isEqualTo(SendOpcode.SEND);
			assertThat(wr.hasFlag(SendWorkRequest.Flag.SIGNALED)).isTrue();
			assertThat(wr.hasFlag(SendWorkRequest.Flag.SOLICITED)).isFalse();
			assertThat(wr.memoryRegion()).isNull();
			assertThat(wr.addressHandle()).isNull();
			assertThat(wr.wrId()).isZero();
			// the native struct names its one sge
			assertThat(wr.wr.get(ADDRESS, Layouts.off(Layouts.IBV_SEND_WR, "sg_list")).address())
				.isEqualTo(wr.sge.address());
			assertThat(wr.wr.get(JAVA_INT, Layouts.off(Layouts.IBV_SEND_WR, "num_sge"))).isOne();
			assertThat(wr.wr.get(ADDRESS, Layouts.off(Layouts.IBV_SEND_WR, "next")).address()).isZero();
		}
		try (ReceiveWorkRequest wr = new ReceiveWorkRequest()) {
			assertThat(wr.memoryRegion()).isNull();
			assertThat(wr.wr.get(ADDRESS, Layouts.off(Layouts.IBV_RECV_WR, "sg_list")).address())
				.isEqualTo(wr.sge.address());
			assertThat(wr.wr.get(JAVA_INT, Layouts.off(Layouts.IBV_RECV_WR, "num_sge"))).isOne();
		}
	}

	@Test
	void settersReturnTheWorkRequestAndFlagsAreExactlyThoseGiven() {
		SendWorkRequest wr = new SendWorkRequest();
		assertThat(wr.wrId(7).opcode(SendOpcode.RDMA_WRITE).immediateData(9).remote(0x1000, 42)).isSameAs(wr);
		assertThat(wr.wrId()).isEqualTo(7);
		assertThat(wr.remoteAddress()).isEqualTo(0x1000);
		assertThat(wr.rkey()).isEqualTo(42);
		wr.flags(SendWorkRequest.Flag.SOLICITED);
		assertThat(wr.hasFlag(SendWorkRequest.Flag.SIGNALED)).isFalse();
		assertThat(wr.hasFlag(SendWorkRequest.Flag.SOLICITED)).isTrue();
		wr.flags();
		assertThat(wr.hasFlag(SendWorkRequest.Flag.SOLICITED)).isFalse();
		assertThatThrownBy(() -> wr.opcode(null)).isInstanceOf(NullPointerException.class);
		assertThatThrownBy(() -> wr.datagram(null, 1, 1)).isInstanceOf(NullPointerException.class);
		assertThatThrownBy(() -> wr.buffer(null, 0, 1)).isInstanceOf(NullPointerException.class);
		assertThat(new ReceiveWorkRequest().wrId(3).wrId()).isEqualTo(3);
	}

	@Test
	void fillWritesTheFieldsOfIbvSendWrWithTheImmediateInNetworkOrder() {
		SendWorkRequest wr = new SendWorkRequest().flags(SendWorkRequest.Flag.SIGNALED)
			.immediateData(0x01020304)
			.remote(0x9000, 55);
		wr.fill(77, 0x5000, 64, 0x1234, SendOpcode.RDMA_WRITE_WITH_IMM, wr.flags, wr.immData, null, wr.remoteAddress,
				wr.rkey, wr.remoteQpn, wr.remoteQkey);
		var l = Layouts.IBV_SEND_WR;
		assertThat(wr.wr.get(JAVA_LONG, Layouts.off(l, "wr_id"))).isEqualTo(77);
		assertThat(wr.wr.get(JAVA_INT, Layouts.off(l, "opcode"))).isEqualTo(1);
		assertThat(wr.wr.get(JAVA_INT, Layouts.off(l, "send_flags"))).isEqualTo(2);
		assertThat(wr.wr.get(JAVA_INT, Layouts.off(l, "anon_imm", "imm_data"))).isEqualTo(0x04030201);
		assertThat(wr.wr.get(JAVA_LONG, Layouts.off(l, "wr", "rdma", "remote_addr"))).isEqualTo(0x9000);
		assertThat(wr.wr.get(JAVA_INT, Layouts.off(l, "wr", "rdma", "rkey"))).isEqualTo(55);
		assertThat(wr.sge.get(JAVA_LONG, Layouts.off(Layouts.IBV_SGE, "addr"))).isEqualTo(0x5000);
		assertThat(wr.sge.get(JAVA_INT, Layouts.off(Layouts.IBV_SGE, "length"))).isEqualTo(64);
		assertThat(wr.sge.get(JAVA_INT, Layouts.off(Layouts.IBV_SGE, "lkey"))).isEqualTo(0x1234);

		ReceiveWorkRequest recv = new ReceiveWorkRequest();
		recv.fillBuffer(5, 0x6000, 128, 0x99);
		assertThat(recv.wr.get(JAVA_LONG, Layouts.off(Layouts.IBV_RECV_WR, "wr_id"))).isEqualTo(5);
		assertThat(recv.sge.get(JAVA_INT, Layouts.off(Layouts.IBV_SGE, "length"))).isEqualTo(128);
	}

	@Test
	void aClaimedWorkRequestRefusesASecondPostAndAClosedOneEveryPost() {
		SendWorkRequest wr = new SendWorkRequest();
		wr.claim.claim("ibv_post_send", wr);
		assertThatThrownBy(() -> wr.claim.claim("ibv_post_send", wr)).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("ibv_post_send")
			.hasMessageContaining("another post is using it");
		wr.claim.unclaim();
		wr.claim.claim("ibv_post_send", wr);
		wr.claim.unclaim();
		wr.close();
		wr.close(); // idempotent
		assertThat(wr.isClosed()).isTrue();
		assertThatThrownBy(() -> wr.claim.claim("ibv_post_send", wr)).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("closed");
	}

	@Test
	void inlineIsAFlagOfItsOwnAndAChainRefusalNamesItsElement() {
		SendWorkRequest wr = new SendWorkRequest().flags(SendWorkRequest.Flag.SIGNALED, SendWorkRequest.Flag.INLINE);
		assertThat(wr.hasFlag(SendWorkRequest.Flag.INLINE)).isTrue();
		assertThat(wr.hasFlag(SendWorkRequest.Flag.SIGNALED)).isTrue();
		assertThat(SendWorkRequest.Flag.INLINE.bit).isEqualTo(1 << 3);
		ChainPostException refused = new ChainPostException("ibv_post_send", Errno.ENOMEM, 5, 9, 42, "QueuePair[RC]");
		assertThat(refused.failedIndex()).isEqualTo(5);
		assertThat(refused.postedCount()).isEqualTo(5);
		assertThat(refused.chainLength()).isEqualTo(9);
		assertThat(refused.failedWrId()).isEqualTo(42);
		assertThat(refused.errnoName()).isEqualTo("ENOMEM");
		assertThat(refused).hasMessageContaining("ibv_post_send failed")
			.hasMessageContaining(
					"element 5 of a chain of 9 (wr_id 42) refused; the 5 before it were posted, none " + "after it");
		ChainPostException unnamed = new ChainPostException("ibv_post_recv", Errno.EINVAL, -1, 3, 0, null);
		assertThat(unnamed.postedCount()).isEqualTo(-1);
		assertThat(unnamed).hasMessageContaining("the provider named no element of the chain of 3");
	}

}
