package dev.rdma.spring.boot.autoconfigure.reliability;

import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import org.springframework.boot.diagnostics.FailureAnalyzer;

import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 7, hostile configuration on the device: {@link Reliability#hostileSets} random
 * property sets (60 by default, 600 with RDMA_RELIABILITY_FULL=1) against the real
 * device; each starts (opening the device, channels and queues) or fails with a
 * FailureAnalyzer message naming an rdma property; no native object stays open after any
 * of them.
 */
@Tag(DeviceTestSupport.TAG)
class HostileConfigurationDeviceTest {

	@Test
	void randomPropertySetsStartOrFailWithAnAnalysedRdmaMessage() {
		String device = DeviceTestSupport.deviceName();
		long seed = Reliability.seed();
		int sets = Reliability.hostileSets(60, 600);
		HostileConfiguration generator = new HostileConfiguration(device, seed);
		List<FailureAnalyzer> analyzers = HostileConfiguration.analyzers();
		HostileConfiguration.Outcomes outcomes = new HostileConfiguration.Outcomes();
		long start = System.nanoTime();
		for (int i = 0; i < sets; i++) {
			HostileConfiguration.check(HostileConfiguration.baseRunner(), generator.next(),
					"device set #" + i + " (seed " + seed + ")", analyzers, outcomes);
		}
		Reliability.report("hostile-config-device", "sets", sets, "seed", seed, "durationMs",
				(System.nanoTime() - start) / 1_000_000, "outcomes", outcomes);
		assertThat(outcomes.started + outcomes.failed).isEqualTo(sets);
		assertThat(outcomes.started).as("sets that started on the device").isPositive();
	}

}
