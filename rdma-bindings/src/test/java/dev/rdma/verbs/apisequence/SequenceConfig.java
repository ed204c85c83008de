package dev.rdma.verbs.apisequence;

import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * What a run of {@link SequenceRunner} does. Every knob is a system property or an
 * environment variable (the environment reaches the device JVM inside the Soft-RoCE VM;
 * system properties get there through {@code RXE_VM_EXTRA_JAVA_OPTS}):
 *
 * <table>
 * <tr>
 * <th>property</th>
 * <th>environment</th>
 * <th>default</th>
 * </tr>
 * <tr>
 * <td>rdma.api.sequences</td>
 * <td>RDMA_API_SEQUENCES</td>
 * <td>the CI count given by the test</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.seed</td>
 * <td>RDMA_SEQUENCE_SEED</td>
 * <td>unset; set: run exactly that one sequence, traced</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.base-seed</td>
 * <td>RDMA_SEQUENCE_BASE_SEED</td>
 * <td>random (printed): the seed the sequences' seeds are drawn from</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.exclude</td>
 * <td>RDMA_SEQUENCE_EXCLUDE</td>
 * <td>none: comma-separated {@link Kind} ids</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.only</td>
 * <td>RDMA_SEQUENCE_ONLY</td>
 * <td>unset; set: only these kinds (and the ones that create objects and post), e.g. to
 * show one defect alone</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.actions</td>
 * <td>RDMA_SEQUENCE_ACTIONS</td>
 * <td>30: the most actions of a sequence (at least a third of it)</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.trace</td>
 * <td>RDMA_SEQUENCE_TRACE</td>
 * <td>false: print every action as it starts</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.max-failures</td>
 * <td>RDMA_SEQUENCE_MAX_FAILURES</td>
 * <td>3: stop after that many failed sequences</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.trace-file</td>
 * <td>RDMA_SEQUENCE_TRACE_FILE</td>
 * <td>target/api-sequences-trace.log (under the working directory): every action of the
 * run, flushed as it starts</td>
 * </tr>
 * <tr>
 * <td>rdma.sequence.action-timeout</td>
 * <td>RDMA_SEQUENCE_ACTION_TIMEOUT</td>
 * <td>20 (s): the watchdog's deadline of one action (close-while-busy actions get 10 s
 * more, the final drain 60 s)</td>
 * </tr>
 * </table>
 */
public record SequenceConfig(int sequences, long baseSeed, Long singleSeed, Set<Kind> excluded, int maxActions,
		boolean trace, int maxFailures, long actionTimeoutMillis, Path traceFile) {

	public static SequenceConfig fromEnvironment(int defaultSequences) {
		String single = knob("rdma.sequence.seed", "RDMA_SEQUENCE_SEED");
		String base = knob("rdma.sequence.base-seed", "RDMA_SEQUENCE_BASE_SEED");
		String traceFile = knob("rdma.sequence.trace-file", "RDMA_SEQUENCE_TRACE_FILE");
		Long singleSeed = single == null ? null : Long.decode(single.trim());
		long baseSeed = base != null ? Long.decode(base.trim()) : new SplittableRandom().nextLong() & Long.MAX_VALUE;
		return new SequenceConfig(
				singleSeed != null ? 1 : intKnob("rdma.api.sequences", "RDMA_API_SEQUENCES", defaultSequences),
				baseSeed, singleSeed,
				excluded(knob("rdma.sequence.exclude", "RDMA_SEQUENCE_EXCLUDE"),
						knob("rdma.sequence.only", "RDMA_SEQUENCE_ONLY")),
				Math.max(3, intKnob("rdma.sequence.actions", "RDMA_SEQUENCE_ACTIONS", 30)),
				singleSeed != null
						|| Boolean.parseBoolean(String.valueOf(knob("rdma.sequence.trace", "RDMA_SEQUENCE_TRACE")))
						|| "1".equals(knob("rdma.sequence.trace", "RDMA_SEQUENCE_TRACE")),
				Math.max(1, intKnob("rdma.sequence.max-failures", "RDMA_SEQUENCE_MAX_FAILURES", 3)),
				1000L * Math.max(5, intKnob("rdma.sequence.action-timeout", "RDMA_SEQUENCE_ACTION_TIMEOUT", 20)),
				Path.of(traceFile != null ? traceFile : "target/api-sequences-trace.log"));
	}

	/**
	 * The kinds that make the objects and the traffic every other kind needs: never left
	 * out by "only".
	 */
	static final Set<Kind> BASIC = EnumSet.of(Kind.CREATE_CHANNEL, Kind.CREATE_CQ, Kind.CREATE_EXT_CQ,
			Kind.CREATE_BUFFER, Kind.CREATE_QP, Kind.POST);

	private static Set<Kind> excluded(String exclude, String only) {
		Set<Kind> out = Kind.parse(exclude);
		if (only != null) {
			Set<Kind> keep = Kind.parse(only);
			keep.addAll(BASIC);
			for (Kind k : Kind.values()) {
				if (!keep.contains(k)) {
					out.add(k);
				}
			}
		}
		return out;
	}

	/** The seed of sequence {@code i} (0-based) of this run. */
	public long seedOf(int i) {
		if (singleSeed != null) {
			return singleSeed;
		}
		SplittableRandom r = new SplittableRandom(baseSeed);
		long s = 0;
		for (int k = 0; k <= i; k++) {
			s = r.nextLong() & Long.MAX_VALUE;
		}
		return s;
	}

	public boolean included(Kind k) {
		return !excluded.contains(k);
	}

	private static String knob(String property, String env) {
		String v = System.getProperty(property);
		if (v == null || v.isBlank()) {
			v = System.getenv(env);
		}
		return v == null || v.isBlank() ? null : v;
	}

	private static int intKnob(String property, String env, int fallback) {
		String v = knob(property, env);
		return v == null ? fallback : Integer.parseInt(v.trim());
	}
}
