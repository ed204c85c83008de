package dev.rdma.verbs;

/**
 * {@code enum ibv_wc_opcode}. The opcodes of send work requests are below 128; those from
 * 128 ({@code IBV_WC_RECV}) up have bit 7 set: the receive opcodes, the SRQ tag-matching
 * operations ({@code TM_*}) and the driver opcodes ({@code DRIVER1} answers an
 * {@code IBV_WR_DRIVER1} send work request, ibv_poll_cq(3)).
 */
public enum WcOpcode {

	SEND(0), RDMA_WRITE(1), RDMA_READ(2), COMP_SWAP(3), FETCH_ADD(4), BIND_MW(5), LOCAL_INV(6), TSO(7),
	/** rdma-core 45+. */
	FLUSH(8), ATOMIC_WRITE(9), RECV(128), RECV_RDMA_WITH_IMM(129), TM_ADD(130), TM_DEL(131), TM_SYNC(132), TM_RECV(133),
	TM_NO_TAG(134), DRIVER1(135), DRIVER2(136), DRIVER3(137),
	/** A code this binding does not know. */
	UNKNOWN(-1);

	private static final WcOpcode[] BY_CODE = new WcOpcode[256];

	static {
		java.util.Arrays.fill(BY_CODE, UNKNOWN);
		for (WcOpcode o : values()) {
			if (o.code >= 0) {
				BY_CODE[o.code] = o;
			}
		}
	}

	private final int code;

	WcOpcode(int code) {
		this.code = code;
	}

	public int code() {
		return code;
	}

	/**
	 * C's {@code opcode & IBV_WC_RECV}: true for every opcode from 128 up. That is every
	 * completion of a receive work request ({@code RECV}, {@code RECV_RDMA_WITH_IMM},
	 * {@code TM_RECV}, {@code TM_NO_TAG}), but also the tag-matching operations
	 * {@code TM_ADD}, {@code TM_DEL}, {@code TM_SYNC} and the driver opcodes
	 * {@code DRIVER1..3}, which are not: test the opcode itself where those can occur.
	 */
	public boolean isReceive() {
		return code >= 128;
	}

	/** Allocation-free lookup. */
	public static WcOpcode of(int code) {
		return code >= 0 && code < 256 ? BY_CODE[code] : UNKNOWN;
	}

}
