package dev.rdma.sample;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The two-process mode's message: the sequence number (8 bytes, little-endian) then bytes
 * derived from it.
 */
final class Payload {

	private Payload() {
	}

	static void fill(byte[] out, long seq) {
		MemorySegment m = MemorySegment.ofArray(out);
		m.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
		for (int i = 8; i < out.length; i++) {
			out[i] = (byte) (seq + i);
		}
	}

	static long seq(MemorySegment buffer) {
		return buffer.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
	}

	static boolean intact(MemorySegment buffer, int length, int expectedLength) {
		if (length != expectedLength) {
			return false;
		}
		long seq = seq(buffer);
		for (int i = 8; i < length; i++) {
			if (buffer.get(ValueLayout.JAVA_BYTE, i) != (byte) (seq + i)) {
				return false;
			}
		}
		return true;
	}

}
