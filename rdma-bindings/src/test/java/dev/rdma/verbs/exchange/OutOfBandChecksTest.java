package dev.rdma.verbs.exchange;

import java.util.HexFormat;

import dev.rdma.verbs.Gid;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.PortAttributes.LinkLayer;
import dev.rdma.verbs.PortAttributes.PortState;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The address checks of {@link OutOfBand} on port attributes made up on the host, for the
 * link layers the device tier does not have (InfiniBand): a port without a LID is refused
 * as {@code ibv_rc_pingpong} refuses it, LID addressing is refused on RoCE only, a peer
 * without a GID is refused on RoCE only. The same checks on a real RoCE port are in
 * {@link OutOfBandPreconditionsDeviceTest}.
 */
class OutOfBandChecksTest {

	static PortAttributes port(LinkLayer linkLayer, int lid) {
		return new PortAttributes(PortState.ACTIVE, 4096, 4096, 128, lid, linkLayer, 2, 16, 5, 0);
	}

	static final Gid IB_GID = new Gid(HexFormat.of().parseHex("fe800000000000000002c90300a1b2c3"));

	/** A subnet prefix and a zero interface id: rdma-core addresses it without GRH. */
	static final Gid PREFIX_ONLY = new Gid(HexFormat.of().parseHex("fe800000000000000000000000000000"));

	@Test
	void anInfinibandPortWithLidZeroIsRefusedAsIbvRcPingpongRefusesIt() {
		assertThatThrownBy(() -> OutOfBand.requireLid(port(LinkLayer.INFINIBAND, 0), "mlx5_0 port 1"))
			.isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("mlx5_0 port 1 (link layer INFINIBAND, state ACTIVE) has LID 0")
			.hasMessageContaining("subnet manager")
			.hasMessageContaining("Couldn't get local LID");
		// rc_pingpong: link_layer != IBV_LINK_LAYER_ETHERNET && !lid
		assertThatThrownBy(() -> OutOfBand.requireLid(port(LinkLayer.UNSPECIFIED, 0), "old0 port 1"))
			.isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("has LID 0");
		assertThatCode(() -> OutOfBand.requireLid(port(LinkLayer.INFINIBAND, 0x17), "mlx5_0 port 1"))
			.doesNotThrowAnyException();
		assertThatCode(() -> OutOfBand.requireLid(port(LinkLayer.ETHERNET, 0), "rxe0 port 1"))
			.doesNotThrowAnyException();
	}

	@Test
	void lidAddressingIsRefusedOnRoceOnly() {
		assertThatThrownBy(
				() -> OutOfBand.requireGidOnRoce(port(LinkLayer.ETHERNET, 0), ExchangeOptions.NO_GID, "rxe0 port 1"))
			.isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("NO_GID (LID addressing)")
			.hasMessageContaining("the link layer of rxe0 port 1 is ETHERNET");
		assertThatCode(() -> OutOfBand.requireGidOnRoce(port(LinkLayer.INFINIBAND, 0x17), ExchangeOptions.NO_GID,
				"mlx5_0 port 1"))
			.doesNotThrowAnyException();
		assertThatCode(() -> OutOfBand.requireGidOnRoce(port(LinkLayer.ETHERNET, 0), 1, "rxe0 port 1"))
			.doesNotThrowAnyException();
	}

	@Test
	void aPeerWithoutGidIsRefusedOnRoceOnlyNamingThePeer() {
		Endpoint noGid = new Endpoint(0, 0x123, 0x456, Endpoint.NO_GID, Endpoint.UNKNOWN_MTU);
		assertThatThrownBy(() -> OutOfBand.requirePeerGidOnRoce(port(LinkLayer.ETHERNET, 0), "rxe0 port 1", noGid,
				"the exchange server /10.0.0.2:18515"))
			.isInstanceOf(ExchangeException.class)
			.hasMessageContaining(
					"the exchange server /10.0.0.2:18515 announced no GID (GID 0:0:0:0:0:0:0:0, LID 0x0000, "
							+ "QPN 0x000123)")
			.hasMessageContaining("rxe0 port 1 is RoCE")
			.hasMessageContaining("ibv_rc_pingpong peer needs -g <gid index> on RoCE");
		assertThatThrownBy(() -> OutOfBand.requirePeerGidOnRoce(port(LinkLayer.ETHERNET, 0), "rxe0 port 1",
				new Endpoint(0, 1, 2, PREFIX_ONLY, Endpoint.UNKNOWN_MTU), "peer"))
			.isInstanceOf(ExchangeException.class)
			.hasMessageContaining("announced no GID");
		assertThatCode(() -> OutOfBand.requirePeerGidOnRoce(port(LinkLayer.INFINIBAND, 0x17), "mlx5_0 port 1",
				new Endpoint(0x18, 1, 2, Endpoint.NO_GID, Endpoint.UNKNOWN_MTU), "peer"))
			.doesNotThrowAnyException();
		assertThatCode(() -> OutOfBand.requirePeerGidOnRoce(port(LinkLayer.ETHERNET, 0), "rxe0 port 1",
				new Endpoint(0, 1, 2, IB_GID, Endpoint.UNKNOWN_MTU), "peer"))
			.doesNotThrowAnyException();
	}

	@Test
	void anEmptyGidEntryNamesTheIndexThePortAndWhereToLook() {
		assertThatThrownBy(() -> {
			throw OutOfBand.emptyGid(5, "rxe0 port 1", null);
		}).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("GID index 5 of rxe0 port 1 is empty: ibv_query_gid gave an all-zero GID")
			.hasMessageContaining("/sys/class/infiniband/rxe0/ports/1/gids");
	}

}
