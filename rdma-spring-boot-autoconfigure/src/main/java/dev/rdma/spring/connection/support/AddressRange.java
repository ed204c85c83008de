package dev.rdma.spring.connection.support;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * An entry of {@code rdma.connections.<name>.allowed-peers}: one IPv4 or IPv6 address, or
 * a CIDR range ({@code 10.0.0.0/24}, {@code fd00::/8}). An IPv4-mapped IPv6 address
 * ({@code ::ffff:10.0.0.1}) of a peer is matched as its IPv4 address. Immutable.
 */
public final class AddressRange {

	private final byte[] network;

	private final int prefix;

	private final String text;

	private AddressRange(byte[] network, int prefix, String text) {
		this.network = network;
		this.prefix = prefix;
		this.text = text;
	}

	/**
	 * The range {@code text} writes: an IP literal (never a host name: nothing is
	 * resolved), optionally {@code /prefix}.
	 * @throws IllegalArgumentException naming what is wrong
	 */
	public static AddressRange parse(String text) {
		Objects.requireNonNull(text, "text");
		String t = text.trim();
		int slash = t.indexOf('/');
		String host = (slash < 0) ? t : t.substring(0, slash);
		if (host.startsWith("[") && host.endsWith("]")) {
			host = host.substring(1, host.length() - 1);
		}
		byte[] address = literal(host);
		int bits = address.length * 8;
		int prefix = bits;
		if (slash >= 0) {
			String p = t.substring(slash + 1);
			if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(Character::isDigit)) {
				throw new IllegalArgumentException("'" + text + "': the prefix length after '/' must be a number");
			}
			prefix = Integer.parseInt(p);
			if (prefix > bits) {
				throw new IllegalArgumentException(
						"'" + text + "': the prefix length must be between 0 and " + bits + ", got " + prefix);
			}
		}
		byte[] network = mask(address, prefix);
		if (!Arrays.equals(network, address)) {
			throw new IllegalArgumentException("'" + text + "' has bits set beyond its /" + prefix + " prefix (did you"
					+ " mean " + render(network) + "/" + prefix + "?)");
		}
		return new AddressRange(network, prefix, t);
	}

	/** The bytes of an IPv4 or IPv6 literal, without any name lookup. */
	private static byte[] literal(String host) {
		if (host.isEmpty()) {
			throw new IllegalArgumentException("an empty address");
		}
		boolean v6 = host.indexOf(':') >= 0;
		boolean v4 = !v6 && host.chars().allMatch(c -> c == '.' || Character.isDigit(c))
				&& host.chars().filter(c -> c == '.').count() == 3;
		boolean hexAndColons = v6 && host.chars().allMatch(c -> c == ':' || c == '.' || Character.digit(c, 16) >= 0);
		if (!v4 && !hexAndColons) {
			throw new IllegalArgumentException(
					"'" + host + "' is not an IPv4 or IPv6 address (host names are not " + "resolved here)");
		}
		if (v4) {
			for (String part : host.split("\\.", -1)) {
				if (part.isEmpty() || part.length() > 3 || Integer.parseInt(part) > 255) {
					throw new IllegalArgumentException("'" + host + "' is not an IPv4 address");
				}
			}
		}
		try {
			InetAddress a = InetAddress.getByName(host); // a literal: no lookup
			return normalized(a);
		}
		catch (UnknownHostException ex) {
			throw new IllegalArgumentException("'" + host + "' is not an IPv4 or IPv6 address", ex);
		}
	}

	/** The address's bytes, an IPv4-mapped IPv6 address as its 4 IPv4 bytes. */
	private static byte[] normalized(InetAddress address) {
		byte[] b = address.getAddress();
		if (address instanceof Inet6Address && isMapped(b)) {
			return Arrays.copyOfRange(b, 12, 16);
		}
		return b;
	}

	private static boolean isMapped(byte[] b) {
		for (int i = 0; i < 10; i++) {
			if (b[i] != 0) {
				return false;
			}
		}
		return b[10] == (byte) 0xff && b[11] == (byte) 0xff;
	}

	private static byte[] mask(byte[] address, int prefix) {
		byte[] out = address.clone();
		for (int i = 0; i < out.length; i++) {
			int keep = Math.clamp(prefix - i * 8L, 0, 8);
			out[i] &= (byte) (0xff00 >>> keep);
		}
		return out;
	}

	private static String render(byte[] address) {
		try {
			return InetAddress.getByAddress(address).getHostAddress();
		}
		catch (UnknownHostException ex) {
			throw new IllegalStateException(ex);
		}
	}

	/** Whether {@code address} is in this range (an IPv6 range never holds IPv4). */
	public boolean contains(InetAddress address) {
		byte[] b = normalized(address);
		if (b.length != network.length) {
			return false;
		}
		return Arrays.equals(mask(b, prefix), network);
	}

	@Override
	public boolean equals(@Nullable Object other) {
		return other instanceof AddressRange r && r.prefix == prefix && Arrays.equals(r.network, network);
	}

	@Override
	public int hashCode() {
		return Arrays.hashCode(network) * 31 + prefix;
	}

	/** As written in the property. */
	@Override
	public String toString() {
		return text;
	}

}
