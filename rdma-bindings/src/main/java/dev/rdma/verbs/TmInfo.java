package dev.rdma.verbs;

/**
 * {@code struct ibv_wc_tm_info} of {@code ibv_wc_read_tm_info}.
 *
 * @param tag the tag from the tag-matching header
 * @param priv opaque user data from the header (u32)
 */
public record TmInfo(long tag, int priv) {
}
