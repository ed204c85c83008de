/**
 * The public API of the binding: see the module description. Every type is non-null
 * unless marked {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs;

import org.jspecify.annotations.NullMarked;
