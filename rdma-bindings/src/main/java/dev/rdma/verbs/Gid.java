package dev.rdma.verbs;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * A 16-byte GID ({@code union ibv_gid}), in network order as the device reports it.
 * Immutable.
 */
public record Gid(byte[] raw) {

	public Gid {
		if (raw.length != 16) {
			throw new IllegalArgumentException("a GID has 16 bytes, got " + raw.length);
		}
		raw = raw.clone();
	}

	@Override
	public byte[] raw() {
		return raw.clone();
	}

	/** All zero: an empty GID table entry. */
	public boolean isZero() {
		for (byte b : raw) {
			if (b != 0) {
				return false;
			}
		}
		return true;
	}

	/**
	 * {@code global.interface_id}: the last 8 bytes, read in network order. rdma-core's
	 * {@code ibv_rc_pingpong} addresses a peer with a GRH only when this is non-zero.
	 */
	public long interfaceId() {
		long id = 0;
		for (int i = 8; i < 16; i++) {
			id = (id << 8) | (raw[i] & 0xff);
		}
		return id;
	}

	/** {@code ::ffff:a.b.c.d}: the RoCE v2 GID of an IPv4 address. */
	public boolean isIpv4Mapped() {
		for (int i = 0; i < 10; i++) {
			if (raw[i] != 0) {
				return false;
			}
		}
		return raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
	}

	@Override
	public boolean equals(Object o) {
		return o instanceof Gid g && Arrays.equals(raw, g.raw);
	}

	@Override
	public int hashCode() {
		return Arrays.hashCode(raw);
	}

	@Override
	public String toString() {
		try {
			InetAddress a = InetAddress.getByAddress(raw);
			if (isIpv4Mapped()) {
				return "::ffff:" + (raw[12] & 0xff) + "." + (raw[13] & 0xff) + "." + (raw[14] & 0xff) + "."
						+ (raw[15] & 0xff);
			}
			return a instanceof Inet6Address ? a.getHostAddress() : HexFormat.of().formatHex(raw);
		}
		catch (UnknownHostException e) {
			return HexFormat.of().formatHex(raw);
		}
	}
}
