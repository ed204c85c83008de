package dev.rdma.verbs.exchange;

import java.util.HexFormat;

import dev.rdma.verbs.AddressHandle;
import dev.rdma.verbs.Gid;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The address handle attributes a datagram peer's record gives, field by field against
 * {@code pp_connect_ctx} of rdma-core's libibverbs/examples/ud_pingpong.c:
 * {@code .dlid = dest->lid} always, and with a GID whose interface id is non-zero
 * {@code is_global = 1}, {@code grh.hop_limit = 64}, {@code grh.dgid = dest->gid},
 * {@code grh.sgid_index = sgid_idx}; SL 0, no flow label, no traffic class.
 */
class DatagramEndpointTest {

	/** An InfiniBand port GID: subnet prefix fe80::, a non-zero interface id. */
	static final Gid IB_GID = new Gid(HexFormat.of().parseHex("fe800000000000000002c90300a1b2c3"));

	static final Gid ROCE_GID = new Gid(HexFormat.of().parseHex("00000000000000000000ffff0a000002"));

	/**
	 * On InfiniBand every GID is global: the peer's LID must stay in the address next to
	 * its GID (with dlid 0 the datagrams went nowhere), and the hop limit is
	 * ud_pingpong's 64, not 1.
	 */
	@Test
	void aGlobalPeerKeepsItsLidAndGetsUdPingpongsHopLimit() {
		DatagramEndpoint peer = new DatagramEndpoint(0x0017, 0x1234, 0x11111111, IB_GID);
		AddressHandle.Attributes ah = peer.addressFrom(1, 3);
		assertThat(ah).isEqualTo(new AddressHandle.Attributes(1, true, IB_GID, 3, 64, 0, 0, 0x0017, 0));
		assertThat(ah.dlid()).as("dlid = dest->lid").isEqualTo(0x0017);
		assertThat(ah.hopLimit()).as("grh.hop_limit").isEqualTo(DatagramEndpoint.HOP_LIMIT).isEqualTo(64);
	}

	@Test
	void aRocePeerIsGlobalWithItsLidZero() {
		DatagramEndpoint peer = new DatagramEndpoint(0, 0x456, 0x22222222, ROCE_GID);
		assertThat(peer.addressFrom(2, 1))
			.isEqualTo(new AddressHandle.Attributes(2, true, ROCE_GID, 1, 64, 0, 0, 0, 0));
	}

	/** Without a GID (interface id 0) the address is the LID alone, no GRH. */
	@Test
	void aPeerWithoutGidIsAddressedByLidAlone() {
		DatagramEndpoint peer = new DatagramEndpoint(0x0042, 0x456, 0x22222222, Endpoint.NO_GID);
		assertThat(peer.addressFrom(1, 5)).isEqualTo(AddressHandle.Attributes.local(1, 0x0042))
			.isEqualTo(new AddressHandle.Attributes(1, false, null, 0, 0, 0, 0, 0x0042, 0));
	}

	/**
	 * The RC path and {@link AddressHandle.Attributes#global} keep rc_pingpong's hop
	 * limit 1: only the datagram address changed.
	 */
	@Test
	void theRcAndGenericDefaultsKeepHopLimitOne() {
		assertThat(AddressHandle.Attributes.global(1, IB_GID, 0).hopLimit()).isEqualTo(1);
		assertThat(AddressHandle.Attributes.global(1, IB_GID, 0).dlid()).isZero();
		assertThat(ExchangeOptions.defaults().parameters().hopLimit()).isEqualTo(1);
	}

}
