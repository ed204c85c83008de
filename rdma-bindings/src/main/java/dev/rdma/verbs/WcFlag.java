package dev.rdma.verbs;

/**
 * {@code enum ibv_wc_flags}: the flags of one completion
 * ({@link WorkCompletion#wcFlags()}).
 */
public enum WcFlag {

	/** GRH is present (UD QPs only). */
	GRH(1),
	/** Immediate data is valid. */
	WITH_IMM(1 << 1),
	/** TCP/UDP and IPv4 header checksums verified (checksum offload). */
	IP_CSUM_OK(1 << 2),
	/** The invalidated rkey is valid (never with {@link #WITH_IMM}). */
	WITH_INV(1 << 3), TM_SYNC_REQ(1 << 4), TM_MATCH(1 << 5), TM_DATA_VALID(1 << 6);

	private final int bit;

	WcFlag(int bit) {
		this.bit = bit;
	}

	public int bit() {
		return bit;
	}

	public boolean isSet(int wcFlags) {
		return (wcFlags & bit) != 0;
	}

}
