package dev.rdma.spring.connection.support;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.cm.ConnectionId;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

/**
 * The record of a connection's region in the connect / accept private data: it fits a
 * connect request, survives the transport's zero padding, is big-endian behind its magic,
 * and anything else (another application's private data, none at all) is no region.
 */
class RemoteRegionTests {

	@Test
	void encodesBigEndianBehindTheMagicAndFitsAConnectRequest() {
		byte[] encoded = new RemoteRegion(0x0102030405060708L, 0x0A0B0C0D, 65536).encode();
		assertThat(encoded).hasSize(RemoteRegion.ENCODED_LENGTH);
		assertThat(RemoteRegion.ENCODED_LENGTH).isLessThanOrEqualTo(ConnectionId.MAX_CONNECT_PRIVATE_DATA);
		assertThat(new String(encoded, 0, 8, StandardCharsets.US_ASCII)).isEqualTo("RDMASBR1");
		assertThat(Arrays.copyOfRange(encoded, 8, 16)).containsExactly(1, 2, 3, 4, 5, 6, 7, 8);
		assertThat(Arrays.copyOfRange(encoded, 16, 20)).containsExactly(0x0A, 0x0B, 0x0C, 0x0D);
		assertThat(Arrays.copyOfRange(encoded, 20, 28)).containsExactly(0, 0, 0, 0, 0, 1, 0, 0);
	}

	@Test
	void parsesWhatWasEncodedAsSentAndAsPaddedByTheTransport() {
		SplittableRandom random = new SplittableRandom(17);
		for (int i = 0; i < 10_000; i++) {
			RemoteRegion region = new RemoteRegion(random.nextLong(), random.nextInt(),
					1 + random.nextLong(Long.MAX_VALUE));
			byte[] encoded = region.encode();
			assertThat(RemoteRegion.parse(encoded)).isEqualTo(region);
			// IB/RoCE deliver a request's 56 bytes and an accept's 196, zero padded
			assertThat(RemoteRegion.parse(Arrays.copyOf(encoded, ConnectionId.MAX_CONNECT_PRIVATE_DATA)))
				.isEqualTo(region);
			assertThat(RemoteRegion.parse(Arrays.copyOf(encoded, ConnectionId.MAX_ACCEPT_PRIVATE_DATA)))
				.isEqualTo(region);
		}
	}

	@Test
	void anythingElseIsNoRegion() {
		byte[] encoded = new RemoteRegion(4096, 7, 1024).encode();
		assertThat(RemoteRegion.parse(null)).isNull();
		assertThat(RemoteRegion.parse(new byte[0])).as("no private data (rdma_client)").isNull();
		assertThat(RemoteRegion.parse(new byte[56])).as("zeros only (padding of nothing)").isNull();
		assertThat(RemoteRegion.parse(Arrays.copyOf(encoded, RemoteRegion.ENCODED_LENGTH - 1))).as("truncated")
			.isNull();
		byte[] otherMagic = encoded.clone();
		otherMagic[7] = '2';
		assertThat(RemoteRegion.parse(otherMagic)).as("another magic").isNull();
		byte[] text = Arrays.copyOf("rdma-spring-boot: max-peers reached".getBytes(StandardCharsets.US_ASCII), 56);
		assertThat(RemoteRegion.parse(text)).as("someone else's private data").isNull();
		byte[] zeroLength = Arrays.copyOf(encoded, 56);
		Arrays.fill(zeroLength, 20, 28, (byte) 0);
		assertThat(RemoteRegion.parse(zeroLength)).as("a region of 0 bytes").isNull();
		byte[] negativeLength = encoded.clone();
		negativeLength[20] = (byte) 0x80;
		assertThat(RemoteRegion.parse(negativeLength)).as("a negative length").isNull();
	}

	@Test
	void aRegionHasAPositiveLength() {
		assertThatIllegalArgumentException().isThrownBy(() -> new RemoteRegion(0, 0, 0)).withMessageContaining("0");
	}

}
