package dev.rdma.spring.connection.support;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.connection.RdmaConnectionFilter;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent.Reason;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

/**
 * Admission without a device: address ranges (IPv4, IPv6, mapped), the order of the
 * checks and filters, the reject's private data, and the refusal log's rate.
 */
class PeerAdmissionTests {

	private static final byte[] NONE = new byte[0];

	private static InetSocketAddress peer(String ip) throws Exception {
		return new InetSocketAddress(InetAddress.getByName(ip), 40000);
	}

	@Test
	void rangesMatchTheirFamilyAndPrefix() throws Exception {
		AddressRange net = AddressRange.parse("10.0.0.0/24");
		assertThat(net.contains(InetAddress.getByName("10.0.0.1"))).isTrue();
		assertThat(net.contains(InetAddress.getByName("10.0.0.255"))).isTrue();
		assertThat(net.contains(InetAddress.getByName("10.0.1.0"))).isFalse();
		assertThat(net.contains(InetAddress.getByName("::ffff:10.0.0.9"))).as("IPv4-mapped").isTrue();
		assertThat(net.contains(InetAddress.getByName("fd00::1"))).isFalse();
		AddressRange host = AddressRange.parse("10.0.0.7");
		assertThat(host.contains(InetAddress.getByName("10.0.0.7"))).isTrue();
		assertThat(host.contains(InetAddress.getByName("10.0.0.6"))).isFalse();
		AddressRange v6 = AddressRange.parse("fd00:1::/32");
		assertThat(v6.contains(InetAddress.getByName("fd00:1::5"))).isTrue();
		assertThat(v6.contains(InetAddress.getByName("fd00:2::5"))).isFalse();
		assertThat(v6.contains(InetAddress.getByName("10.0.0.1"))).isFalse();
		assertThat(AddressRange.parse("[fe80::1]").contains(InetAddress.getByName("fe80::1"))).isTrue();
		assertThat(AddressRange.parse("0.0.0.0/0").contains(InetAddress.getByName("192.168.1.1"))).isTrue();
		assertThat(AddressRange.parse("10.0.0.128/25").contains(InetAddress.getByName("10.0.0.200"))).isTrue();
		assertThat(AddressRange.parse("10.0.0.128/25").contains(InetAddress.getByName("10.0.0.127"))).isFalse();
	}

	@Test
	void badRangesAreRefusedWithoutAnyLookup() {
		for (String bad : List.of("", "10.0.0", "10.0.0.256", "10.0.0.1/", "10.0.0.1/x", "10.0.0.0/33", "fd00::/129",
				"localhost", "10.0.0.1/-1", "1.2.3.4.5", "::g", "10.0.0.1/24")) {
			assertThatIllegalArgumentException().as(bad).isThrownBy(() -> AddressRange.parse(bad));
		}
	}

	@Test
	void allowedPeersRefuseOtherAddressesBeforeAnyFilter() throws Exception {
		List<String> asked = new ArrayList<>();
		PeerAdmission admission = new PeerAdmission("rdma.connections.orders.allowed-peers",
				List.of(AddressRange.parse("10.0.0.0/24"), AddressRange.parse("fd00::/8")), () -> List.of((request) -> {
					asked.add(request.peerAddress().getAddress().getHostAddress());
					return null;
				}));
		admission.resolve();
		assertThat(admission.check("orders", peer("10.0.0.1"), NONE, false)).isNull();
		assertThat(admission.check("orders", peer("fd00::2"), NONE, true)).isNull();
		PeerAdmission.Refusal refused = admission.check("orders", peer("10.0.1.1"), NONE, false);
		assertThat(refused).isNotNull();
		assertThat(refused.reason()).isEqualTo(Reason.NOT_ALLOWED);
		assertThat(refused.detail()).contains("rdma.connections.orders.allowed-peers [10.0.0.0/24, fd00::/8]");
		assertThat(admission.check("orders", null, NONE, false).reason()).isEqualTo(Reason.NOT_ALLOWED);
		assertThat(asked).as("the filter only sees admitted addresses")
			.containsExactly("10.0.0.1", "fd00:0:0:0:0:0:0:2");
	}

	@Test
	void theFirstFilterThatRefusesDecidesAndAThrowingFilterRefuses() throws Exception {
		List<String> calls = new ArrayList<>();
		RdmaConnectionFilter first = (request) -> {
			calls.add("first");
			return (request.privateData().length > 0 && request.privateData()[0] == 'X') ? "no X here" : null;
		};
		RdmaConnectionFilter second = (request) -> {
			calls.add("second");
			if (request.peerAddress().getPort() == 1) {
				throw new IllegalStateException("boom");
			}
			return null;
		};
		PeerAdmission admission = new PeerAdmission("p", List.of(), () -> List.of(first, second));
		admission.resolve();
		PeerAdmission.Refusal x = admission.check("orders", peer("10.0.0.1"), "X".getBytes(StandardCharsets.US_ASCII),
				false);
		assertThat(x.reason()).isEqualTo(Reason.FILTERED);
		assertThat(x.toPeer()).isEqualTo("no X here");
		assertThat(calls).containsExactly("first");
		PeerAdmission.Refusal thrown = admission.check("orders", new InetSocketAddress("10.0.0.1", 1), NONE, false);
		assertThat(thrown.reason()).isEqualTo(Reason.FILTERED);
		assertThat(thrown.detail()).contains("boom");
		assertThat(admission.check("orders", peer("10.0.0.1"), NONE, false)).isNull();
	}

	@Test
	void aFilterGetsACopyOfThePrivateData() throws Exception {
		byte[] data = { 1, 2, 3 };
		PeerAdmission admission = new PeerAdmission("p", List.of(), () -> List.of((request) -> {
			request.privateData()[0] = 9;
			return null;
		}));
		admission.resolve();
		assertThat(admission.check("orders", peer("10.0.0.1"), data, false)).isNull();
		assertThat(data[0]).isEqualTo((byte) 1);
	}

	@Test
	void malformedRegionRecordsAreRefusedOverRdmaCmOnly() throws Exception {
		PeerAdmission admission = PeerAdmission.open("orders");
		admission.resolve();
		byte[] bad = new RemoteRegion(0x1000, 7, 4096).encode();
		bad[7] = '2'; // another version
		PeerAdmission.Refusal r = admission.check("orders", peer("10.0.0.1"), bad, false);
		assertThat(r.reason()).isEqualTo(Reason.MALFORMED);
		assertThat(r.toPeer()).contains("unsupported version");
		assertThat(admission.check("orders", peer("10.0.0.1"), new RemoteRegion(0x1000, 7, 4096).encode(), false))
			.isNull();
	}

	@Test
	void rejectDataIsPrintableBoundedAndReadable() {
		byte[] data = PeerAdmission.rejectData("address not allowed");
		assertThat(new String(data, StandardCharsets.US_ASCII))
			.isEqualTo("rdma-spring-boot: refused: address not allowed");
		assertThat(PeerAdmission.reasonOf(java.util.Arrays.copyOf(data, 148))).isEqualTo("address not allowed");
		byte[] long_ = PeerAdmission.rejectData("é\n" + "x".repeat(400));
		assertThat(long_).hasSize(PeerAdmission.MAX_REJECT_BYTES);
		for (byte b : long_) {
			assertThat(b).isBetween((byte) 0x20, (byte) 0x7e);
		}
		assertThat(PeerAdmission.reasonOf("other".getBytes(StandardCharsets.US_ASCII))).isNull();
	}

	@Test
	void aFloodOfRefusalsWritesOneLinePerIntervalWithTheCountOfTheOthers() {
		RefusalLog log = new RefusalLog(Duration.ofSeconds(10));
		long t = 1_000_000_000L;
		assertThat(log.line("refused a", t)).isEqualTo("refused a");
		int lines = 0;
		for (int i = 1; i <= 10_000; i++) { // 10,000 refusals in 5 s
			if (log.line("refused " + i, t + i * 500_000L) != null) {
				lines++;
			}
		}
		assertThat(lines).isZero();
		assertThat(log.suppressed()).isEqualTo(10_000);
		String next = log.line("refused b", t + Duration.ofSeconds(10).toNanos());
		assertThat(next).isEqualTo("refused b (10000 more peer(s) refused since the last such line, not logged; at most"
				+ " one line per 10s)");
		assertThat(log.suppressed()).isZero();
		assertThat(log.line("refused c", t + Duration.ofSeconds(11).toNanos())).isNull();
	}

}
