/**
 * The FFM plumbing of the binding (not exported): one class per native library, the
 * struct layouts, the linker helpers. Every type is non-null unless marked
 * {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs.ffm;

import org.jspecify.annotations.NullMarked;
