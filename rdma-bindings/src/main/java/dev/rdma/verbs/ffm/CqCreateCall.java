package dev.rdma.verbs.ffm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One provider's CQ-creating verb ({@code ibv_create_cq_ex}, {@code efadv_create_cq}):
 * called with the context's {@code struct ibv_context *}, a filled
 * {@code struct ibv_cq_init_attr_ex}, a confined arena for the verb's own attribute
 * structs, and the errno capture segment; returns the {@code struct ibv_cq_ex *} or NULL.
 */
@FunctionalInterface
public interface CqCreateCall {

	MemorySegment create(Arena arena, MemorySegment capture, MemorySegment context, MemorySegment initAttr)
			throws Throwable;

}
