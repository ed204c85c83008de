package dev.rdma.verbs.apisequence;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import dev.rdma.verbs.NativeObjects;

/**
 * Runs the sequences of a {@link SequenceConfig} on a thread of its own, watched from the
 * calling thread: an action that outlives its deadline is reported with the seed, the
 * trace so far and a thread dump, and ends the run (the stuck thread is left behind: it
 * may hold a CQ forever). A failed sequence is reported the same way (without the dump),
 * its context closed, and the run goes on with the next seed until {@code maxFailures}.
 */
public final class SequenceRunner {

	/** A failed sequence: its seed, the action, what broke, and the trace up to it. */
	public record Failure(long seed, String action, String message, String trace, boolean timeout) {
		@Override
		public String toString() {
			return (timeout ? "TIMEOUT" : "FAILED") + " seed=" + seed + " at " + action + ": " + message;
		}
	}

	private final SequenceConfig cfg;

	private final Stats stats = new Stats();

	private final Progress progress;

	private final List<Failure> failures = new ArrayList<>();

	private final List<Kind> included;

	private volatile boolean stop;

	public SequenceRunner(SequenceConfig cfg) {
		this.cfg = cfg;
		this.progress = new Progress(cfg.trace(), cfg.traceFile());
		this.included = Arrays.stream(Kind.values()).filter(cfg::included).toList();
	}

	public Stats stats() {
		return stats;
	}

	public synchronized List<Failure> failures() {
		return List.copyOf(failures);
	}

	/**
	 * The kinds a run must have run at least once: all included ones when the run focused
	 * on each.
	 */
	public List<Kind> included() {
		return included;
	}

	/**
	 * Kinds each sequence focuses on (weighted up): every kind gets a focus within
	 * ceil(kinds / 3) sequences.
	 */
	public static final int FOCUS = 3;

	Set<Kind> focusOf(int i) {
		Set<Kind> f = EnumSet.noneOf(Kind.class);
		if (!included.isEmpty() && cfg.singleSeed() == null) {
			for (int k = 0; k < FOCUS; k++) {
				f.add(included.get((FOCUS * i + k) % included.size()));
			}
		}
		return f;
	}

	/**
	 * Runs every sequence; returns when done, after {@code maxFailures} failures, or at
	 * the first timeout.
	 */
	public void run() {
		Thread worker = new Thread(this::loop, "api-seq-runner");
		worker.setDaemon(true);
		worker.start();
		while (worker.isAlive()) {
			try {
				worker.join(250);
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				throw new AssertionError("interrupted", e);
			}
			if (worker.isAlive() && progress.overdue()) {
				stop = true;
				String dump = threadDump();
				Failure f = new Failure(progress.seed(), progress.action(),
						"no progress within the action's deadline "
								+ "(a call blocked past its bound, or a deadlock): the thread dump shows where",
						progress.trace(), true);
				report(f, dump);
				return;
			}
		}
	}

	private void loop() {
		for (int i = 0; i < cfg.sequences() && !stop; i++) {
			long seed = cfg.seedOf(i);
			Set<Kind> focus = focusOf(i);
			String header = "API-SEQUENCE " + (i + 1) + "/" + cfg.sequences() + " seed=" + seed + " focus=" + focus;
			System.out.println(header);
			System.out.flush();
			progress.startSequence(header, seed);
			long before = NativeObjects.open();
			ApiSequence s = new ApiSequence(seed, focus, cfg, stats, progress, before);
			try {
				s.run();
				long after = NativeObjects.open();
				if (after != before) {
					throw new SequenceFailure("NativeObjects.open() is " + after + " after the sequence, " + before
							+ " before it: " + NativeObjects.openByType());
				}
				stats.sequences.increment();
			}
			catch (Throwable t) {
				if (stop) {
					return; // the watchdog reported it
				}
				stats.sequences.increment();
				stats.failedSequences.increment();
				String message = t instanceof SequenceFailure ? t.getMessage() : "unexpected " + t;
				Failure f = new Failure(seed, progress.action(), message, progress.trace(), false);
				report(f, stackOf(t));
				progress.begin("cleanup after the failure of seed " + seed, cfg.actionTimeoutMillis() + 10_000);
				try {
					s.abandon();
				}
				catch (Throwable cleanup) {
					System.out.println("API-SEQUENCE cleanup after seed " + seed + " failed too: " + cleanup);
				}
				progress.end();
				if (failures().size() >= cfg.maxFailures()) {
					System.out.println("API-SEQUENCE stopping after " + cfg.maxFailures() + " failed sequences");
					return;
				}
			}
		}
	}

	private void report(Failure f, String details) {
		synchronized (this) {
			failures.add(f);
		}
		String rerun = "RDMA_SEQUENCE_SEED=" + f.seed()
				+ (cfg.excluded().isEmpty() ? ""
						: " RDMA_SEQUENCE_EXCLUDE=" + String.join(",", cfg.excluded().stream().map(Kind::id).toList()))
				+ (cfg.maxActions() == 30 ? "" : " RDMA_SEQUENCE_ACTIONS=" + cfg.maxActions());
		System.out.println("API-SEQUENCE " + f + "\n" + "  re-run exactly this sequence (traced): " + rerun
				+ " RDMA_TEST_MODULES=rdma-bindings " + "RDMA_TEST_SKIP_SAMPLE=1 scripts/test --device-only\n"
				+ "    (or -Drdma.sequence.seed=" + f.seed() + " in the device JVM's options)\n"
				+ "  trace of the sequence:\n" + f.trace() + "\n" + details);
		System.out.flush();
	}

	private static String stackOf(Throwable t) {
		StringBuilder sb = new StringBuilder("  stack:\n");
		for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
			sb.append("    ").append(c).append('\n');
			StackTraceElement[] st = c.getStackTrace();
			for (int i = 0; i < Math.min(st.length, 25); i++) {
				sb.append("      at ").append(st[i]).append('\n');
			}
		}
		return sb.toString();
	}

	private static String threadDump() {
		StringBuilder sb = new StringBuilder("  thread dump:\n");
		for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
			Thread t = e.getKey();
			sb.append("    \"").append(t.getName()).append("\" ").append(t.getState()).append('\n');
			StackTraceElement[] st = e.getValue();
			for (int i = 0; i < Math.min(st.length, 30); i++) {
				sb.append("      at ").append(st[i]).append('\n');
			}
		}
		return sb.toString();
	}

}
