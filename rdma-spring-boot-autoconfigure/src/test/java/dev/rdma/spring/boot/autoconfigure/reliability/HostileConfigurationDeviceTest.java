package dev.rdma.spring.boot.autoconfigure.reliability;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

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
		long seed = Reliability.seed();
		int sets = Reliability.hostileSets(60, 600);
		HostileConfiguration.Outcomes outcomes = HostileConfiguration.runSets("device", DeviceTestSupport.deviceName(),
				seed, sets, HostileConfiguration.analyzers());
		assertThat(outcomes.started).as("sets that started on the device").isPositive();
	}

}
