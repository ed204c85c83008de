package dev.rdma.verbs.exchange;

import java.util.HashSet;
import java.util.Set;

import dev.rdma.verbs.QueuePair.ConnectionParameters;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The values the Javadoc of {@link ConnectionParameters#DEFAULTS} and
 * {@link ExchangeOptions#defaults()} states, against {@code pp_connect_ctx} and
 * {@code main} of rdma-core's libibverbs/examples/rc_pingpong.c, and the MTU the pingpong
 * record does not carry.
 */
class ConnectionDefaultsTest {

	@Test
	void theDefaultsAreRcPingpongsExceptThePathMtuAndThePsns() {
		ConnectionParameters d = ConnectionParameters.DEFAULTS;
		// rc_pingpong's: .timeout 14, .retry_cnt 7, .rnr_retry 7, .min_rnr_timer 12,
		// .max_rd_atomic 1, .max_dest_rd_atomic 1, grh.hop_limit 1, sl 0 (-l)
		assertThat(d.timeout()).isEqualTo(14);
		assertThat(d.retryCount()).isEqualTo(7);
		assertThat(d.rnrRetry()).isEqualTo(7);
		assertThat(d.minRnrTimer()).isEqualTo(12);
		assertThat(d.maxRdAtomic()).isEqualTo(1);
		assertThat(d.maxDestRdAtomic()).isEqualTo(1);
		assertThat(d.hopLimit()).isEqualTo(1);
		assertThat(d.serviceLevel()).isZero();
		// not rc_pingpong's: its mtu is IBV_MTU_1024, its psn lrand48() & 0xffffff
		assertThat(d.pathMtu()).isEqualTo(ConnectionParameters.ACTIVE_MTU);
		assertThat(d.sqPsn()).isZero();
		assertThat(d.rqPsn()).isZero();
	}

	@Test
	void theExchangeDefaultsHaveRcPingpongsMtuAndARandomPsn() {
		ConnectionParameters e = ExchangeOptions.defaults().parameters();
		assertThat(e.pathMtu()).isEqualTo(1024);
		assertThat(e.withPathMtu(ConnectionParameters.ACTIVE_MTU).withSqPsn(0))
			.isEqualTo(ConnectionParameters.DEFAULTS);
		Set<Integer> psns = new HashSet<>();
		for (int i = 0; i < 20; i++) {
			int psn = ExchangeOptions.defaults().parameters().sqPsn();
			assertThat(psn).isBetween(0, ConnectionParameters.MAX_PSN);
			psns.add(psn);
		}
		assertThat(psns).as("20 random 24-bit PSNs").hasSizeGreaterThan(1);
	}

	/** The pingpong record has no MTU: a peer's record always decodes to UNKNOWN_MTU. */
	@Test
	void thePingpongRecordCarriesNoMtu() {
		Endpoint local = new Endpoint(0x11, 0x222, 0x333, Endpoint.NO_GID, 4096);
		Endpoint decoded = PingpongWire.decode(PingpongWire.encode(local));
		assertThat(decoded.mtu()).isEqualTo(Endpoint.UNKNOWN_MTU);
		assertThat(decoded).isEqualTo(new Endpoint(0x11, 0x222, 0x333, Endpoint.NO_GID, Endpoint.UNKNOWN_MTU));
		assertThat(PingpongWire.encode(local)).isEqualTo(PingpongWire.encode(decoded));
	}

}
