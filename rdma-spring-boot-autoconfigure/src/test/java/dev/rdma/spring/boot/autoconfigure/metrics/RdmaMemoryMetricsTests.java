package dev.rdma.spring.boot.autoconfigure.metrics;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.support.DefaultListableBeanFactory;

import dev.rdma.spring.boot.autoconfigure.PinnedMemory;
import dev.rdma.verbs.LockedMemory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The locked-memory gauges: the configured total, what is registered now and the limit.
 */
class RdmaMemoryMetricsTests {

	@Test
	void theGaugesReadTheTotalTheRegisteredBytesAndTheLimit() {
		SimpleMeterRegistry meters = new SimpleMeterRegistry();
		DefaultListableBeanFactory factory = new DefaultListableBeanFactory();
		factory.registerSingleton("meters", meters);
		PinnedMemory pinned = new PinnedMemory()
			.add(new PinnedMemory.Part("connection", "c", "rdma.connections.c.message-size", 8192, 2, "x"));
		new RdmaMemoryMetrics(factory.getBeanProvider(MeterRegistry.class), pinned).afterSingletonsInstantiated();
		assertThat(meters.get("rdma.memory.pinned.configured").gauge().value()).isEqualTo(16384);
		assertThat(meters.get("rdma.memory.pinned").gauge().value()).isEqualTo(LockedMemory.registered());
		LockedMemory.Limit limit = LockedMemory.current();
		assertThat(meters.get("rdma.memory.locked.limit").gauge().value())
			.isEqualTo(limit.unlimited() ? Double.POSITIVE_INFINITY : (double) limit.soft());
	}

}
