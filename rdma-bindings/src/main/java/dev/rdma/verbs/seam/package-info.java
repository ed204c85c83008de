/**
 * The benchmarks' seam into the binding, exported only to {@code dev.rdma.benchmarks}
 * ({@code exports ... to}): what the poll path calls, without the binding around it, and
 * CQs over device-less completion rings. It reaches the binding's package-private
 * constructors and fields through {@link java.lang.invoke.MethodHandles#privateLookupIn}
 * (allowed within one module), so {@code dev.rdma.verbs} has no code path for it and does
 * not depend on it. Every type is non-null unless marked {@code @Nullable}.
 */
@NullMarked
package dev.rdma.verbs.seam;

import org.jspecify.annotations.NullMarked;
