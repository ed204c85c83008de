package dev.rdma.verbs;

import java.util.List;

import dev.rdma.verbs.apisequence.Kind;
import dev.rdma.verbs.apisequence.SequenceConfig;
import dev.rdma.verbs.apisequence.SequenceRunner;
import dev.rdma.verbs.testing.DeviceTestSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Randomized stateful test of the public API on a real device: seeded random sequences of
 * actions over channels, legacy and extended CQs, buffers and loopback QPs on one
 * context, from up to four threads at once, checked against the contract of
 * docs/reliability.md ("Random API sequences"): no call crashes or freezes the JVM,
 * misuse only produces IllegalStateException, IllegalArgumentException or VerbsException,
 * no completion is lost, duplicated or invented, and NativeObjects is back to its
 * baseline after every sequence.
 *
 * <p>
 * {@value #CI_SEQUENCES} sequences by default (the device tier under TCG emulation);
 * {@code RDMA_API_SEQUENCES=5000} runs thousands, {@code RDMA_SEQUENCE_SEED=<seed>}
 * exactly one (see {@link SequenceConfig}).
 */
@Tag(DeviceTestSupport.TAG)
class ApiSequenceDeviceTest {

	/**
	 * Sequences per CI run: the device tier's budget for this test is about 90 s in the
	 * Soft-RoCE VM.
	 */
	static final int CI_SEQUENCES = 50;

	@Test
	void randomApiSequencesKeepTheContract() {
		SequenceConfig cfg = SequenceConfig.fromEnvironment(CI_SEQUENCES);
		System.out.println("API-SEQUENCES " + cfg.sequences() + " sequence(s), "
				+ (cfg.singleSeed() != null ? "seed " + cfg.singleSeed()
						: "base seed " + cfg.baseSeed() + " (RDMA_SEQUENCE_BASE_SEED=" + cfg.baseSeed()
								+ " repeats this run)")
				+ ", up to " + cfg.maxActions() + " actions each"
				+ (cfg.excluded().isEmpty() ? "" : ", excluded: " + cfg.excluded()));
		long t0 = System.nanoTime();
		SequenceRunner runner = new SequenceRunner(cfg);
		runner.run();
		long seconds = (System.nanoTime() - t0) / 1_000_000_000L;
		System.out.println("API-SEQUENCES done in " + seconds + " s: " + runner.stats().summary());
		assertThat(runner.failures())
			.as("sequences that broke the contract (seed, action, message); the log above "
					+ "has each one's trace and how to re-run it")
			.isEmpty();
		assertThat(runner.stats().sequences()).isEqualTo(cfg.sequences());
		assertThat(runner.stats().completions()).as("completions checked").isPositive();
		if (cfg.singleSeed() == null && (long) cfg.sequences() * SequenceRunner.FOCUS >= runner.included().size()) {
			List<Kind> never = runner.included().stream().filter(k -> runner.stats().ran(k) == 0).toList();
			assertThat(never).as("action kinds that never ran although every kind had a focus sequence").isEmpty();
		}
	}

}
