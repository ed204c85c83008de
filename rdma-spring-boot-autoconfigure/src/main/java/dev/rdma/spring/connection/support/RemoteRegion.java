package dev.rdma.spring.connection.support;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.jspecify.annotations.Nullable;

/**
 * The memory region one side of a connection exposes to one-sided operations of the other
 * ({@code rdma.connections.<name>.remote-access-size}), as carried in the private data of
 * {@code rdma_connect} (client) and {@code rdma_accept} (server).
 *
 * <p>
 * <b>Wire format</b> ({@value #ENCODED_LENGTH} bytes, network byte order): the magic
 * {@value #MAGIC_TEXT} as 8 ASCII bytes, the region's address (u64), its rkey (u32), its
 * length (u64). It fits the 56 bytes of a connect request. The transport pads private
 * data with zeros (IB/RoCE: to 56 bytes of a request, 196 of an accept), so
 * {@link #parse} reads the first bytes and ignores the rest; data that does not start
 * with the magic (a peer that is not this starter, such as rdma-core's
 * {@code rdma_client}, or one without a region) is no region.
 *
 * @param address the peer's virtual address of the region's first byte (the
 * {@code remote_addr} of RDMA WRITE and READ)
 * @param rkey the region's remote key
 * @param length the region's size in bytes, positive
 */
public record RemoteRegion(long address, int rkey, long length) {

	/** The magic as text. */
	static final String MAGIC_TEXT = "RDMASBR1";

	/** The magic that starts the record: {@value #MAGIC_TEXT} in ASCII, big-endian. */
	static final long MAGIC = 0x52444D4153425231L;

	/** Bytes of an encoded record. */
	public static final int ENCODED_LENGTH = 28;

	public RemoteRegion {
		if (length <= 0) {
			throw new IllegalArgumentException("a remote region's length must be positive, got " + length);
		}
	}

	/** This record as private data ({@value #ENCODED_LENGTH} bytes). */
	public byte[] encode() {
		byte[] out = new byte[ENCODED_LENGTH];
		ByteBuffer.wrap(out).order(ByteOrder.BIG_ENDIAN).putLong(MAGIC).putLong(address).putInt(rkey).putLong(length);
		return out;
	}

	/**
	 * The record at the start of {@code privateData}, or null when there is none (too
	 * short, another magic, or a length that is not positive).
	 */
	public static @Nullable RemoteRegion parse(byte @Nullable [] privateData) {
		if (privateData == null || privateData.length < ENCODED_LENGTH) {
			return null;
		}
		ByteBuffer in = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
		if (in.getLong() != MAGIC) {
			return null;
		}
		long address = in.getLong();
		int rkey = in.getInt();
		long length = in.getLong();
		return length > 0 ? new RemoteRegion(address, rkey, length) : null;
	}

	/** The most bytes of a connect request's private data (IB CM's REQ: 56). */
	static final int MAX_REQUEST_PRIVATE_DATA = 56;

	/**
	 * The largest region a peer of this starter advertises (its
	 * {@code remote-access-size} is at most 1 GiB).
	 */
	static final long MAX_LENGTH = 1L << 30;

	/**
	 * Why the private data of a connect request cannot be taken, or null when it can: no
	 * record at all (no magic: a peer without a region, or not this starter) is fine; a
	 * record of another version ({@code RDMASBR} and a version other than {@code 1}), or
	 * one whose length is not between 1 and {@value #MAX_LENGTH} bytes, or whose end
	 * would overflow the address space, is not, nor data longer than
	 * {@value #MAX_REQUEST_PRIVATE_DATA} bytes. Reads at most the first
	 * {@value #ENCODED_LENGTH} bytes; never throws.
	 */
	static @Nullable String problem(byte @Nullable [] privateData) {
		if (privateData == null) {
			return null;
		}
		if (privateData.length > MAX_REQUEST_PRIVATE_DATA) {
			return privateData.length + " bytes, more than the " + MAX_REQUEST_PRIVATE_DATA + " of a connect request";
		}
		int prefix = MAGIC_TEXT.length() - 1;
		if (privateData.length < prefix) {
			return null;
		}
		for (int i = 0; i < prefix; i++) {
			if (privateData[i] != MAGIC_TEXT.charAt(i)) {
				return null;
			}
		}
		if (privateData.length == prefix || privateData[prefix] != MAGIC_TEXT.charAt(prefix)) {
			return "a region record of an unsupported version (" + MAGIC_TEXT + " expected)";
		}
		if (privateData.length < ENCODED_LENGTH) {
			return "a region record of " + privateData.length + " bytes, not " + ENCODED_LENGTH;
		}
		ByteBuffer in = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
		long address = in.getLong(8);
		long length = in.getLong(20);
		if (length <= 0 || length > MAX_LENGTH) {
			return "a region record of length " + length + " (1 to " + MAX_LENGTH + " bytes)";
		}
		if (Long.compareUnsigned(address + length, address) < 0) {
			return "a region record whose end overflows the address space (0x" + Long.toHexString(address) + " + "
					+ length + ")";
		}
		return null;
	}

	@Override
	public String toString() {
		return "RemoteRegion[" + length + " bytes at 0x" + Long.toHexString(address) + ", rkey 0x"
				+ Integer.toHexString(rkey) + "]";
	}

}
