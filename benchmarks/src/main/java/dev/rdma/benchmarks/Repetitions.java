package dev.rdma.benchmarks;

/**
 * The repetitions of one case: {@code warmup} warm-up repetitions, then more until the
 * JIT has compiled nothing for {@value #QUIET_REPS} repetitions in a row (at most
 * {@value #MAX_EXTRA_SECONDS} s more), then, after {@link Jit#awaitQuiet()} (nothing
 * compiling or queued), {@code reps} measured ones.
 *
 * <p>
 * A fixed number of warm-up repetitions does not say that the code measured is the final
 * code: with two CPUs the C2 queue is often busy, a method then first gets C1 code and is
 * upgraded only when its counters next overflow, which for a method called once per poll
 * can fall after the warm-up. A long-running poller only ever runs the final code, so the
 * measured repetitions start once the repetitions themselves no longer make the JIT
 * compile.
 *
 * <pre>Repetitions rep = new Repetitions("case", warmup, reps);
 * while (rep.next()) {
 *     ... time one repetition ...
 *     if (rep.measured()) v[rep.index()] = ...;
 * }</pre>
 */
public final class Repetitions {

	static final int QUIET_REPS = 10;
	static final long MAX_EXTRA_SECONDS = 20;

	private final String name;

	private final int warmup;

	private final int reps;

	private int warmed;

	private int quiet;

	private long lastCompileMillis = -1;

	private long extraDeadline;

	private boolean measuring;

	private int index = -1;

	public Repetitions(String name, int warmup, int reps) {
		this.name = name;
		this.warmup = warmup;
		this.reps = reps;
	}

	/** Call before each repetition: true when one more is due (warm-up or measured). */
	public boolean next() {
		if (!measuring) {
			if (warmed < warmup) {
				warmed++;
				return true;
			}
			if (warmed == warmup) {
				extraDeadline = System.nanoTime() + MAX_EXTRA_SECONDS * 1_000_000_000L;
			}
			long compiled = Jit.compilationMillis();
			quiet = compiled == lastCompileMillis ? quiet + 1 : 0;
			lastCompileMillis = compiled;
			if (quiet < QUIET_REPS && System.nanoTime() < extraDeadline) {
				warmed++;
				return true;
			}
			if (quiet < QUIET_REPS) {
				System.err.println("Repetitions: " + name + ": the JIT was still compiling after " + warmed
						+ " warm-up repetitions; measuring anyway");
			}
			Jit.awaitQuiet();
			measuring = true;
		}
		return ++index < reps;
	}

	/** Whether the current repetition is measured (not warm-up). */
	public boolean measured() {
		return measuring;
	}

	/** The index of the current measured repetition, 0 .. reps-1. */
	public int index() {
		return index;
	}

	/** Repetitions run so far, warm-up included. */
	public int total() {
		return warmed + Math.min(index + 1, reps);
	}

}
