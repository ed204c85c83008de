package dev.rdma.verbs.apisequence;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What the sequence thread is doing now, for the watchdog: the sequence's seed, the
 * action and its deadline, and the trace of the sequence so far. Every line also goes to
 * a trace file, flushed at once, so that a run whose JVM froze (no thread can print then)
 * still leaves its last action on disk.
 */
final class Progress {

	private final boolean live;

	private final Writer file;

	private final List<String> trace = new ArrayList<>();

	private volatile long seed;

	private volatile String action = "(starting)";

	private volatile long deadline = Long.MAX_VALUE;

	Progress(boolean live, Path traceFile) {
		this.live = live;
		try {
			if (traceFile.getParent() != null) {
				Files.createDirectories(traceFile.getParent());
			}
			this.file = Files.newBufferedWriter(traceFile, StandardCharsets.UTF_8);
		}
		catch (IOException e) {
			throw new UncheckedIOException("cannot write the trace file " + traceFile.toAbsolutePath(), e);
		}
	}

	synchronized void startSequence(String header, long seed) {
		this.seed = seed;
		trace.clear();
		write(header);
	}

	private void write(String s) {
		try {
			synchronized (file) {
				file.write(s);
				file.write('\n');
				file.flush();
			}
		}
		catch (IOException e) {
			throw new UncheckedIOException(e);
		}
	}

	long seed() {
		return seed;
	}

	String action() {
		return action;
	}

	/** Starts an action that must end within {@code timeoutMillis}. */
	void begin(String action, long timeoutMillis) {
		this.action = action;
		line(action);
		this.deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
	}

	void end() {
		deadline = Long.MAX_VALUE;
	}

	/** A line of the trace (also printed at once in live mode). */
	void line(String s) {
		synchronized (this) {
			trace.add(s);
		}
		write("  " + s);
		if (live) {
			System.out.println("  [seq " + seed + "] " + s);
			System.out.flush();
		}
	}

	boolean overdue() {
		return System.nanoTime() - deadline > 0;
	}

	synchronized String trace() {
		return String.join("\n", trace.stream().map(s -> "    " + s).toList());
	}

}
