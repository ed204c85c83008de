package dev.rdma.spring.boot.autoconfigure.metrics;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;

import dev.rdma.spring.boot.autoconfigure.PinnedMemory;
import dev.rdma.verbs.LockedMemory;

/**
 * Gauges of locked memory: {@code rdma.memory.pinned} (bytes the memory regions of this
 * JVM pin now, whole pages), {@code rdma.memory.pinned.configured} (what the
 * configuration pins at most, {@link PinnedMemory#total()}) and
 * {@code rdma.memory.locked.limit} (the process's {@code RLIMIT_MEMLOCK}, +Inf when
 * unlimited or with CAP_IPC_LOCK). Read when scraped; nothing per message.
 */
public class RdmaMemoryMetrics implements SmartInitializingSingleton {

	private final ObjectProvider<MeterRegistry> meterRegistry;

	private final PinnedMemory pinned;

	public RdmaMemoryMetrics(ObjectProvider<MeterRegistry> meterRegistry, PinnedMemory pinned) {
		this.meterRegistry = meterRegistry;
		this.pinned = pinned;
	}

	/** Registers the gauges; nothing without a unique {@link MeterRegistry}. */
	@Override
	public void afterSingletonsInstantiated() {
		MeterRegistry meters = meterRegistry.getIfUnique();
		if (meters == null) {
			return;
		}
		Gauge.builder("rdma.memory.pinned", LockedMemory::registered)
			.description("Bytes the RDMA memory regions of this JVM pin (locked memory)")
			.baseUnit("bytes")
			.register(meters);
		long total = pinned.total();
		Gauge.builder("rdma.memory.pinned.configured", () -> total)
			.description("Bytes the rdma.* configuration pins at most (every connection with all its peers)")
			.baseUnit("bytes")
			.register(meters);
		Gauge.builder("rdma.memory.locked.limit", RdmaMemoryMetrics::limit)
			.description("The process's locked-memory limit (RLIMIT_MEMLOCK), +Inf when unlimited or CAP_IPC_LOCK")
			.baseUnit("bytes")
			.register(meters);
	}

	static double limit() {
		LockedMemory.Limit limit = LockedMemory.current();
		return limit.unlimited() ? Double.POSITIVE_INFINITY : limit.soft();
	}

}
