package dev.rdma.spring.boot.autoconfigure.reliability;

import java.util.List;

import org.junit.jupiter.api.Test;

import org.springframework.boot.diagnostics.FailureAnalyzer;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 7, hostile configuration on the host (no RDMA device):
 * {@link Reliability#hostileSets} random property sets (300 by default, 3000 with
 * RDMA_RELIABILITY_FULL=1) each start (the starter backs off) or fail with a
 * FailureAnalyzer message naming an rdma property. Seed: RDMA_RELIABILITY_SEED (default
 * 7).
 */
class HostileConfigurationTests {

	@Test
	void randomPropertySetsStartOrFailWithAnAnalysedRdmaMessage() {
		long seed = Reliability.seed();
		int sets = Reliability.hostileSets(300, 3000);
		List<FailureAnalyzer> analyzers = HostileConfiguration.analyzers();
		assertThat(analyzers).anyMatch(a -> a.getClass().getSimpleName().equals("RdmaFailureAnalyzer"));
		HostileConfiguration.Outcomes outcomes = HostileConfiguration.runSets("host", null, seed, sets, analyzers);
		assertThat(outcomes.failed).isPositive();
	}

}
