package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.Gid;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The endpoint record's wire format, byte for byte against the code of rdma-core's
 * {@code ibv_rc_pingpong} ({@code pp_client_exch_dest}, {@code gid_to_wire_gid},
 * {@code wire_gid_to_gid} of libibverbs/examples/pingpong.c, compiled with gcc), both
 * ways, and its refusal of malformed input.
 */
class PingpongWireTest {

	static final HexFormat HEX = HexFormat.of();

	/** rdma-core's code, verbatim apart from main(). */
	static final String PINGPONG_C = """
			#include <endian.h>
			#include <stdint.h>
			#include <stdio.h>
			#include <string.h>
			#include <infiniband/verbs.h>
			void wire_gid_to_gid(const char *wgid, union ibv_gid *gid)
			{
				char tmp[9];
				__be32 v32;
				int i;
				uint32_t tmp_gid[4];
				for (tmp[8] = 0, i = 0; i < 4; ++i) {
					memcpy(tmp, wgid + i * 8, 8);
					sscanf(tmp, "%x", &v32);
					tmp_gid[i] = be32toh(v32);
				}
				memcpy(gid, tmp_gid, sizeof(*gid));
			}
			void gid_to_wire_gid(const union ibv_gid *gid, char wgid[])
			{
				uint32_t tmp_gid[4];
				int i;
				memcpy(tmp_gid, gid, sizeof(tmp_gid));
				for (i = 0; i < 4; ++i)
					sprintf(&wgid[i * 8], "%08x", htobe32(tmp_gid[i]));
			}
			int main(int argc, char **argv)
			{
				char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"];
				char gid[33];
				union ibv_gid g;
				unsigned lid, qpn, psn;
				if (argc == 6 && !strcmp(argv[1], "enc")) {
					sscanf(argv[2], "%x", &lid); sscanf(argv[3], "%x", &qpn); sscanf(argv[4], "%x", &psn);
					for (int i = 0; i < 16; i++) { unsigned b; sscanf(argv[5] + 2 * i, "%2x", &b); g.raw[i] = b; }
					memset(msg, 0x55, sizeof msg);
					gid_to_wire_gid(&g, gid);
					sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, gid);
					for (size_t i = 0; i < sizeof msg; i++) printf("%02x", (unsigned char) msg[i]);
					printf(" %zu\\n", sizeof msg);
					return 0;
				}
				if (argc == 3 && !strcmp(argv[1], "dec")) {
					sscanf(argv[2], "%x:%x:%x:%s", &lid, &qpn, &psn, gid);
					wire_gid_to_gid(gid, &g);
					printf("%x %x %x ", lid, qpn, psn);
					for (int i = 0; i < 16; i++) printf("%02x", g.raw[i]);
					printf("\\n");
					return 0;
				}
				return 2;
			}
			""";

	static Endpoint endpoint(int lid, int qpn, int psn, String gidHex) {
		return new Endpoint(lid, qpn, psn, new Gid(HEX.parseHex(gidHex)), Endpoint.UNKNOWN_MTU);
	}

	static final Endpoint[] CASES = { endpoint(0, 0x11, 0xabcdef, "00000000000000000000ffff0a000001"),
			endpoint(0xffff, 0xffffff, 0, "fe800000000000000211223344556677"),
			endpoint(0x1a, 0x2b3c, 0x4d5e6f, "00000000000000000000000000000000"),
			endpoint(7, 1, 0xffffff, "0123456789abcdeffedcba9876543210") };

	@Test
	void encodesExactlyTheBytesOfIbvRcPingpongAndDecodesWhatItReads(@TempDir Path dir) throws Exception {
		Path exe = compile(dir);
		for (Endpoint e : CASES) {
			String[] c = run(exe.toString(), "enc", Integer.toHexString(e.lid()), Integer.toHexString(e.qpn()),
					Integer.toHexString(e.psn()), HEX.formatHex(e.gid().raw()))
				.trim()
				.split(" ");
			assertThat(c[1]).as("sizeof msg").isEqualTo(String.valueOf(PingpongWire.MESSAGE_BYTES));
			byte[] encoded = PingpongWire.encode(e);
			assertThat(HEX.formatHex(encoded)).as("the bytes of %s", e).isEqualTo(c[0]);
			assertThat(PingpongWire.decode(HEX.parseHex(c[0]))).isEqualTo(e);
			// what C's sscanf + wire_gid_to_gid reads from the Java bytes
			String text = new String(encoded, 0, encoded.length - 1, StandardCharsets.US_ASCII);
			assertThat(run(exe.toString(), "dec", text).trim())
				.isEqualTo(Integer.toHexString(e.lid()) + " " + Integer.toHexString(e.qpn()) + " "
						+ Integer.toHexString(e.psn()) + " " + HEX.formatHex(e.gid().raw()));
		}
	}

	@Test
	void theGidIsItsMemoryOrderInLowercaseHex() {
		byte[] msg = PingpongWire.encode(CASES[0]);
		assertThat(new String(msg, StandardCharsets.US_ASCII))
			.isEqualTo("0000:000011:abcdef:00000000000000000000ffff0a000001\0");
		assertThat(msg).hasSize(52);
	}

	@Test
	void roundTripOfRandomRecords() {
		java.util.Random random = new java.util.Random(15);
		for (int n = 0; n < 500; n++) {
			roundTrip(random.nextInt(0x10000), random.nextInt(0x1000000), random.nextInt(0x1000000), random.nextLong(),
					random.nextLong());
		}
	}

	private static void roundTrip(int lid, int qpn, int psn, long prefix, long id) {
		byte[] raw = new byte[16];
		for (int i = 0; i < 8; i++) {
			raw[i] = (byte) (prefix >>> (56 - 8 * i));
			raw[8 + i] = (byte) (id >>> (56 - 8 * i));
		}
		Endpoint e = new Endpoint(lid, qpn, psn, new Gid(raw), Endpoint.UNKNOWN_MTU);
		assertThat(PingpongWire.decode(PingpongWire.encode(e))).isEqualTo(e);
		DatagramEndpoint d = new DatagramEndpoint(lid, qpn, (int) prefix, new Gid(raw));
		byte[] wire = PingpongWire.encode(d);
		assertThat(wire).hasSize(PingpongWire.DATAGRAM_MESSAGE_BYTES);
		assertThat(PingpongWire.decodeDatagram(wire)).isEqualTo(d);
	}

	@Test
	void theDoneMessageIsFiveBytes() {
		assertThat(PingpongWire.done()).containsExactly('d', 'o', 'n', 'e', 0);
		assertThat(PingpongWire.isDone("done\0".getBytes(StandardCharsets.US_ASCII))).isTrue();
		assertThat(PingpongWire.isDone("done".getBytes(StandardCharsets.US_ASCII))).isFalse();
	}

	/** A copy of {@code record} with {@code value} at {@code offset}. */
	private static byte[] with(byte[] record, int offset, char value) {
		byte[] copy = record.clone();
		copy[offset] = (byte) value;
		return copy;
	}

	@Test
	void refusesMalformedRecordsNamingTheFault() {
		byte[] good = PingpongWire.encode(CASES[1]);
		assertMalformed(java.util.Arrays.copyOf(good, 51), "is 51 bytes, not 52");
		assertMalformed(with(good, 51, 'x'), "does not end with a NUL");
		assertMalformed(with(good, 4, '-'), "no ':' at offset 4");
		assertMalformed(with(good, 30, 'g'), "non-hex character at offset 30");
		assertMalformed(with(good, 6, ' '), "non-hex character at offset 6");
		byte[] binary = new byte[52];
		binary[0] = (byte) 0xff;
		assertMalformed(binary, "\\xff");
		byte[] http = java.util.Arrays.copyOf("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII),
				52);
		assertMalformed(http, "GET / HTTP/1.1\\x0d\\x0a");
		assertThatThrownBy(() -> PingpongWire.decodeDatagram(good)).isInstanceOf(ExchangeException.class)
			.hasMessageContaining("is 52 bytes, not 54");
	}

	@Test
	void refusesOutOfRangeFields() {
		Gid zero = Endpoint.NO_GID;
		assertThatThrownBy(() -> new Endpoint(0x10000, 1, 1, zero, 0)).hasMessageContaining("lid must be 0..65535");
		assertThatThrownBy(() -> new Endpoint(1, 0x1000000, 1, zero, 0)).hasMessageContaining("qpn");
		assertThatThrownBy(() -> new Endpoint(1, 1, -1, zero, 0)).hasMessageContaining("psn");
		assertThatThrownBy(() -> new Endpoint(1, 1, 1, zero, 1500)).hasMessageContaining("mtu");
		assertThatThrownBy(() -> new DatagramEndpoint(1, -1, 1, zero)).hasMessageContaining("qpn");
	}

	private static void assertMalformed(byte[] message, String why) {
		assertThatThrownBy(() -> PingpongWire.decode(message)).isInstanceOf(ExchangeException.class)
			.hasMessageContaining("not an endpoint record")
			.hasMessageContaining(why);
	}

	private static Path compile(Path dir) throws Exception {
		assertThat(Path.of("/usr/include/infiniband/verbs.h"))
			.as("the rdma-core headers (apt-get install libibverbs-dev) are needed for this test")
			.exists();
		Path c = dir.resolve("pingpong_wire.c");
		Files.writeString(c, PINGPONG_C);
		Path exe = dir.resolve("pingpong_wire");
		run("gcc", "-std=gnu11", "-Wall", "-Werror", "-Wno-format", "-o", exe.toString(), c.toString());
		return exe;
	}

	private static String run(String... command) throws IOException, InterruptedException {
		Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
		String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
		assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
		assertThat(p.exitValue()).as(String.join(" ", command) + ":\n" + out).isZero();
		return out;
	}

}
