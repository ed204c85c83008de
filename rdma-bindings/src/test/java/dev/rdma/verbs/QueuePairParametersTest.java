package dev.rdma.verbs;

import java.util.function.Supplier;

import dev.rdma.verbs.QueuePair.ConnectionParameters;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The QP and address-handle parameter objects, without a device: defaults and range
 * checks.
 */
class QueuePairParametersTest {

	private static final ConnectionParameters D = ConnectionParameters.DEFAULTS;

	private static void refused(Supplier<?> build, String parameter) {
		assertThatThrownBy(build::get).as(parameter)
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageStartingWith(parameter);
	}

	@Test
	void defaultsAreTheValuesConnectAlwaysUsed() {
		assertThat(ConnectionParameters.defaults()).isSameAs(D);
		assertThat(D.pathMtu()).isEqualTo(ConnectionParameters.ACTIVE_MTU);
		assertThat(D.sqPsn()).isZero();
		assertThat(D.rqPsn()).isZero();
		assertThat(D.timeout()).isEqualTo(14);
		assertThat(D.retryCount()).isEqualTo(7);
		assertThat(D.rnrRetry()).isEqualTo(7);
		assertThat(D.minRnrTimer()).isEqualTo(12);
		assertThat(D.maxRdAtomic()).isEqualTo(1);
		assertThat(D.maxDestRdAtomic()).isEqualTo(1);
		assertThat(D.hopLimit()).isEqualTo(1);
		assertThat(D.serviceLevel()).isZero();
	}

	@Test
	void eachWitherChangesOneValue() {
		ConnectionParameters p = D.withPathMtu(1024)
			.withSqPsn(0xABCDEF)
			.withRqPsn(0x123456)
			.withTimeout(20)
			.withRetryCount(3)
			.withRnrRetry(0)
			.withMinRnrTimer(1)
			.withMaxRdAtomic(16)
			.withMaxDestRdAtomic(8)
			.withHopLimit(64)
			.withServiceLevel(5);
		assertThat(p).isEqualTo(new ConnectionParameters(1024, 0xABCDEF, 0x123456, 20, 3, 0, 1, 16, 8, 64, 5));
		assertThat(D.withTimeout(20)).isEqualTo(new ConnectionParameters(0, 0, 0, 20, 7, 7, 12, 1, 1, 1, 0));
		assertThat(D).as("immutable").isEqualTo(new ConnectionParameters(0, 0, 0, 14, 7, 7, 12, 1, 1, 1, 0));
	}

	@Test
	void theLimitsThemselvesAreAccepted() {
		for (int mtu : new int[] { 0, 256, 512, 1024, 2048, 4096 }) {
			assertThat(D.withPathMtu(mtu).pathMtu()).isEqualTo(mtu);
		}
		ConnectionParameters max = new ConnectionParameters(4096, (1 << 24) - 1, (1 << 24) - 1, 31, 7, 7, 31, 255, 255,
				255, 15);
		assertThat(max.sqPsn()).isEqualTo(ConnectionParameters.MAX_PSN);
		assertThat(new ConnectionParameters(256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0).timeout()).isZero();
	}

	@Test
	void eachOutOfRangeParameterIsRefusedByName() {
		for (int mtu : new int[] { -1, 1, 128, 255, 300, 1000, 1536, 8192 }) {
			refused(() -> D.withPathMtu(mtu), "pathMtu (path_mtu)");
		}
		refused(() -> D.withSqPsn(-1), "sqPsn (sq_psn)");
		refused(() -> D.withSqPsn(1 << 24), "sqPsn (sq_psn)");
		refused(() -> D.withRqPsn(-1), "rqPsn (rq_psn)");
		refused(() -> D.withRqPsn(1 << 24), "rqPsn (rq_psn)");
		refused(() -> D.withTimeout(-1), "timeout");
		refused(() -> D.withTimeout(32), "timeout");
		refused(() -> D.withRetryCount(-1), "retryCount (retry_cnt)");
		refused(() -> D.withRetryCount(8), "retryCount (retry_cnt)");
		refused(() -> D.withRnrRetry(-1), "rnrRetry (rnr_retry)");
		refused(() -> D.withRnrRetry(8), "rnrRetry (rnr_retry)");
		refused(() -> D.withMinRnrTimer(-1), "minRnrTimer (min_rnr_timer)");
		refused(() -> D.withMinRnrTimer(32), "minRnrTimer (min_rnr_timer)");
		refused(() -> D.withMaxRdAtomic(-1), "maxRdAtomic (max_rd_atomic)");
		refused(() -> D.withMaxRdAtomic(256), "maxRdAtomic (max_rd_atomic)");
		refused(() -> D.withMaxDestRdAtomic(-1), "maxDestRdAtomic (max_dest_rd_atomic)");
		refused(() -> D.withMaxDestRdAtomic(256), "maxDestRdAtomic (max_dest_rd_atomic)");
		refused(() -> D.withHopLimit(-1), "hopLimit (hop_limit)");
		refused(() -> D.withHopLimit(256), "hopLimit (hop_limit)");
		refused(() -> D.withServiceLevel(-1), "serviceLevel (sl)");
		refused(() -> D.withServiceLevel(16), "serviceLevel (sl)");
		assertThatThrownBy(() -> D.withTimeout(32)).hasMessage("timeout must be 0..31, got 32");
		assertThatThrownBy(() -> D.withSqPsn(1 << 24)).hasMessage("sqPsn (sq_psn) must be 0..16777215, got 16777216");
	}

	@Test
	void thePathMtuIsAtMostThePortsActiveMtu() {
		assertThat(D.pathMtuCode(4096, "rxe0 port 1")).as("IBV_MTU_4096").isEqualTo(5);
		assertThat(D.pathMtuCode(1024, "rxe0 port 1")).as("IBV_MTU_1024").isEqualTo(3);
		assertThat(D.withPathMtu(256).pathMtuCode(4096, "rxe0 port 1")).as("IBV_MTU_256").isEqualTo(1);
		assertThat(D.withPathMtu(1024).pathMtuCode(1024, "rxe0 port 1")).isEqualTo(3);
		assertThatThrownBy(() -> D.withPathMtu(2048).pathMtuCode(1024, "rxe0 port 1"))
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessage("pathMtu (path_mtu) 2048 exceeds the active MTU 1024 of rxe0 port 1");
	}

	@Test
	void addressHandleAttributesAreRangeChecked() {
		Gid gid = new Gid(new byte[16]);
		AddressHandle.Attributes a = AddressHandle.Attributes.global(1, gid, 1);
		assertThat(a).isEqualTo(new AddressHandle.Attributes(1, true, gid, 1, 1, 0, 0, 0, 0));
		assertThat(
				a.withHopLimit(64).withFlowLabel(0xFFFFF).withTrafficClass(255).withServiceLevel(15).withDlid(0xFFFF))
			.isEqualTo(new AddressHandle.Attributes(1, true, gid, 1, 64, 0xFFFFF, 255, 0xFFFF, 15));
		assertThat(AddressHandle.Attributes.local(2, 7).global()).isFalse();
		refused(() -> AddressHandle.Attributes.global(0, gid, 1), "port (port_num)");
		refused(() -> AddressHandle.Attributes.global(256, gid, 1), "port (port_num)");
		refused(() -> AddressHandle.Attributes.global(1, gid, -1), "sgidIndex (grh.sgid_index)");
		refused(() -> AddressHandle.Attributes.global(1, gid, 256), "sgidIndex (grh.sgid_index)");
		refused(() -> a.withHopLimit(256), "hopLimit (grh.hop_limit)");
		refused(() -> a.withFlowLabel(1 << 20), "flowLabel (grh.flow_label)");
		refused(() -> a.withFlowLabel(-1), "flowLabel (grh.flow_label)");
		refused(() -> a.withTrafficClass(256), "trafficClass (grh.traffic_class)");
		refused(() -> a.withDlid(0x10000), "dlid");
		refused(() -> a.withServiceLevel(16), "serviceLevel (sl)");
		assertThatThrownBy(() -> AddressHandle.Attributes.global(1, null, 1)).isInstanceOf(NullPointerException.class)
			.hasMessageContaining("destGid");
	}

	/**
	 * The range of a post within its memory region, checked before anything is posted: an
	 * offset near Long.MAX_VALUE made offset + length overflow and pass.
	 */
	@Test
	void aPostRangeOutsideTheRegionIsRefusedWithoutOverflow() {
		Arguments.requireWithin(4096, 0, 4096);
		Arguments.requireWithin(4096, 4032, 64);
		Arguments.requireWithin(4096, 4096, 0);
		Arguments.requireWithin(0, 0, 0);
		for (long[] bad : new long[][] { { 4096, 4033, 64 }, { 4096, -1, 1 }, { 4096, 0, -1 }, { 4096, 4097, 0 },
				{ 4096, Long.MAX_VALUE - 10, 64 }, { 4096, Long.MAX_VALUE, 1 }, { 4096, Long.MIN_VALUE, 64 } }) {
			assertThatThrownBy(() -> Arguments.requireWithin(bad[0], bad[1], (int) bad[2]))
				.as("offset %d length %d", bad[1], bad[2])
				.isInstanceOf(IndexOutOfBoundsException.class)
				.hasMessageContaining("offset " + bad[1] + " + length " + bad[2] + " outside the 4096-byte");
		}
	}

}
