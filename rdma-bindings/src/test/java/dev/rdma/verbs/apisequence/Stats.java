package dev.rdma.verbs.apisequence;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import dev.rdma.verbs.VerbsException;

/**
 * What a run did: sequences, actions per kind, completions checked, refusals per
 * exception type, notes.
 */
public final class Stats {

	final LongAdder sequences = new LongAdder();

	final LongAdder failedSequences = new LongAdder();

	final LongAdder actions = new LongAdder();

	final LongAdder threadSteps = new LongAdder();

	final LongAdder completions = new LongAdder();

	final LongAdder posted = new LongAdder();

	private final Map<Kind, LongAdder> byKind = new ConcurrentHashMap<>();

	private final Map<String, LongAdder> refusals = new ConcurrentHashMap<>();

	private final Map<String, LongAdder> notes = new ConcurrentHashMap<>();

	void action(Kind k) {
		actions.increment();
		byKind.computeIfAbsent(k, x -> new LongAdder()).increment();
	}

	/** An expected refusal (misuse answered with the exception the contract allows). */
	void refusal(Throwable t) {
		String key = t instanceof VerbsException v ? "VerbsException(" + v.errnoName() + ")"
				: t.getClass().getSimpleName();
		refusals.computeIfAbsent(key, x -> new LongAdder()).increment();
	}

	void note(String what) {
		notes.computeIfAbsent(what, x -> new LongAdder()).increment();
	}

	public long sequences() {
		return sequences.sum();
	}

	public long failedSequences() {
		return failedSequences.sum();
	}

	public long actions() {
		return actions.sum();
	}

	public long completions() {
		return completions.sum();
	}

	public long ran(Kind k) {
		LongAdder a = byKind.get(k);
		return a == null ? 0 : a.sum();
	}

	public long refusals() {
		return refusals.values().stream().mapToLong(LongAdder::sum).sum();
	}

	public long noted(String what) {
		LongAdder a = notes.get(what);
		return a == null ? 0 : a.sum();
	}

	private static Map<String, Long> sorted(Map<?, LongAdder> m) {
		Map<String, Long> out = new TreeMap<>();
		m.forEach((k, v) -> out.put(String.valueOf(k), v.sum()));
		return out;
	}

	public String summary() {
		return "sequences=" + sequences.sum() + " (failed " + failedSequences.sum() + "), actions=" + actions.sum()
				+ ", thread steps=" + threadSteps.sum() + ", work requests posted=" + posted.sum()
				+ ", completions checked=" + completions.sum() + ", misuse refusals=" + refusals() + "\n"
				+ "  refusals by type: " + sorted(refusals) + "\n" + "  actions by kind: " + sorted(byKind) + "\n"
				+ "  notes: " + sorted(notes);
	}

}
