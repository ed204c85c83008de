/**
 * The EFA provider (libefa), like pyverbs' {@code providers/efa}:
 * {@link EfaCompletionQueue} ({@code efadv_create_cq}) with the EFA-only completion
 * fields it reads ({@code efadv_wc_read_sgid}, {@code efadv_wc_is_unsolicited}), and
 * {@link EfaWcFlag}. Depends on {@code dev.rdma.verbs}; nothing there depends on this
 * package. Every type is non-null unless marked {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs.efa;

import org.jspecify.annotations.NullMarked;
