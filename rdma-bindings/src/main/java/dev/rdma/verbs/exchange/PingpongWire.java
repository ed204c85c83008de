package dev.rdma.verbs.exchange;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;

import dev.rdma.verbs.Gid;

/**
 * The wire format of rdma-core's {@code ibv_rc_pingpong} out-of-band exchange, and this
 * binding's datagram variant. Stateless; thread-safe.
 *
 * <p>
 * An RC record is {@code sprintf("%04x:%06x:%06x:%s", lid, qpn, psn, gid)} with its
 * trailing NUL: {@value #MESSAGE_BYTES} bytes, the GID as the 16 raw bytes in memory
 * order, 32 lowercase hex digits (rdma-core's {@code gid_to_wire_gid}). The client writes
 * its record, the server answers with its own, the client writes {@code "done\0"}
 * ({@code "done"} and NUL) and closes.
 *
 * <p>
 * A datagram record ({@link DatagramEndpoint}) is {@code "%04x:%06x:%08x:%s"} (LID, QPN,
 * Q_Key, GID) with its NUL: {@value #DATAGRAM_MESSAGE_BYTES} bytes, exchanged the same
 * way. It is this binding's own: {@code ibv_ud_pingpong} has no Q_Key on the wire.
 */
public final class PingpongWire {

	/** Bytes of an RC record on the wire, NUL included. */
	public static final int MESSAGE_BYTES = 52;

	/** Bytes of a datagram record on the wire, NUL included. */
	public static final int DATAGRAM_MESSAGE_BYTES = 54;

	private static final byte[] DONE_BYTES = "done\0".getBytes(StandardCharsets.US_ASCII);

	/** The client's final message: {@code "done"} and NUL, 5 bytes. */
	public static final int DONE_BYTES_LENGTH = 5;

	private static final HexFormat HEX = HexFormat.of();

	private PingpongWire() {
	}

	/** A copy of the client's final 5 bytes, {@code "done\0"}. */
	public static byte[] done() {
		return DONE_BYTES.clone();
	}

	/** Whether {@code message} is exactly {@code "done\0"}. */
	public static boolean isDone(byte[] message) {
		return Arrays.equals(message, DONE_BYTES);
	}

	/** The {@value #MESSAGE_BYTES} bytes of {@code endpoint} (its MTU is not sent). */
	public static byte[] encode(Endpoint endpoint) {
		return nulTerminated(String.format("%04x:%06x:%06x:%s", endpoint.lid(), endpoint.qpn(), endpoint.psn(),
				HEX.formatHex(endpoint.gid().raw())), MESSAGE_BYTES);
	}

	/** The {@value #DATAGRAM_MESSAGE_BYTES} bytes of {@code endpoint}. */
	public static byte[] encode(DatagramEndpoint endpoint) {
		return nulTerminated(String.format("%04x:%06x:%08x:%s", endpoint.lid(), endpoint.qpn(), endpoint.qkey(),
				HEX.formatHex(endpoint.gid().raw())), DATAGRAM_MESSAGE_BYTES);
	}

	/**
	 * The RC record in {@code message}, with {@link Endpoint#UNKNOWN_MTU}.
	 * @throws ExchangeException when {@code message} is not {@value #MESSAGE_BYTES} bytes
	 * of {@code "%04x:%06x:%06x:"}, 32 hex digits and a NUL
	 */
	public static Endpoint decode(byte[] message) {
		long[] f = fields(message, MESSAGE_BYTES, 4, 6, 6);
		return new Endpoint((int) f[0], (int) f[1], (int) f[2], gid(message, 19), Endpoint.UNKNOWN_MTU);
	}

	/**
	 * The datagram record in {@code message}.
	 * @throws ExchangeException when {@code message} is not
	 * {@value #DATAGRAM_MESSAGE_BYTES} bytes of {@code "%04x:%06x:%08x:"}, 32 hex digits
	 * and a NUL
	 */
	public static DatagramEndpoint decodeDatagram(byte[] message) {
		long[] f = fields(message, DATAGRAM_MESSAGE_BYTES, 4, 6, 8);
		return new DatagramEndpoint((int) f[0], (int) f[1], (int) f[2], gid(message, 21));
	}

	private static byte[] nulTerminated(String text, int length) {
		byte[] out = Arrays.copyOf(text.getBytes(StandardCharsets.US_ASCII), length);
		if (text.length() != length - 1) {
			throw new IllegalStateException("encoded " + text.length() + " characters, expected " + (length - 1));
		}
		return out;
	}

	/** The hex fields of the given widths, each followed by ':', checking the frame. */
	private static long[] fields(byte[] message, int length, int... widths) {
		if (message.length != length) {
			throw malformed(message, "is " + message.length + " bytes, not " + length);
		}
		if (message[length - 1] != 0) {
			throw malformed(message, "does not end with a NUL");
		}
		long[] values = new long[widths.length];
		int pos = 0;
		for (int i = 0; i < widths.length; i++) {
			values[i] = hex(message, pos, widths[i]);
			pos += widths[i];
			if (message[pos] != ':') {
				throw malformed(message, "has no ':' at offset " + pos);
			}
			pos++;
		}
		hex(message, pos, 32); // the GID: checked here, read by gid()
		return values;
	}

	private static long hex(byte[] message, int from, int digits) {
		long v = 0;
		for (int i = from; i < from + digits; i++) {
			int d = Character.digit(message[i], 16);
			if (d < 0 || message[i] < 0) {
				throw malformed(message, "has a non-hex character at offset " + i);
			}
			v = (v << 4) | d;
		}
		return v;
	}

	private static Gid gid(byte[] message, int from) {
		return new Gid(HEX.parseHex(new String(message, from, 32, StandardCharsets.US_ASCII)));
	}

	private static ExchangeException malformed(byte[] message, String why) {
		StringBuilder shown = new StringBuilder();
		for (byte b : message) {
			shown.append(b >= 0x20 && b < 0x7f ? String.valueOf((char) b) : String.format("\\x%02x", b & 0xff));
		}
		return new ExchangeException("not an endpoint record: the peer's message " + why + ": \"" + shown + "\"");
	}

}
