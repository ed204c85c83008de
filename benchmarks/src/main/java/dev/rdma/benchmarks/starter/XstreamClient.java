package dev.rdma.benchmarks.starter;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

import dev.rdma.benchmarks.InsnMark;
import dev.rdma.benchmarks.Jit;
import dev.rdma.benchmarks.Progress;
import dev.rdma.benchmarks.ThreadAllocation;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.spring.connection.ReadStream;
import dev.rdma.spring.connection.SendBatch;

import static dev.rdma.benchmarks.starter.StarterBench.report;
import static dev.rdma.benchmarks.starter.XstreamBench.BATCH;
import static dev.rdma.benchmarks.starter.XstreamBench.MESSAGE_SIZE;
import static dev.rdma.benchmarks.starter.XstreamBench.REGION;

/**
 * The client side of {@link XstreamBench}: its streaming loops (sends, writes, the
 * readers' READs) and the measurement of each operation and size; nothing in the loops
 * allocates.
 */
final class XstreamClient {

	private final RdmaConnection connection;

	private final XstreamBench.Sink sink;

	private final MemorySegment source = Arena.global().allocate(MESSAGE_SIZE, 64).fill((byte) 0x5a);

	private final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory
		.getThreadMXBean();

	private final com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean) ManagementFactory
		.getOperatingSystemMXBean();

	/** Sends per doorbell ({@code XSTREAM_BATCH}): 1 = {@code send} one by one. */
	private final int perDoorbell;

	/** Borrowed send buffers sent as they are ({@code XSTREAM_ZERO_COPY=1}). */
	private final boolean zeroCopy;

	// settling: at most SETTLE_SECONDS, until QUIET_SECONDS in a row compile nothing
	private static final int SETTLE_SECONDS = 20, QUIET_SECONDS = 3;

	/** The main thread's batch, reused (when {@link #perDoorbell} is above 1). */
	private final SendBatch sendBatch;

	/** Writes posted so far (the main thread's). */
	private long posted;

	/** Per reader, READs completed (padded: one counter per 8 longs). */
	private final AtomicLongArray done;

	private final Thread[] readerThreads;

	private final MemorySegment[] targets;

	/** READs per reader call ({@code XSTREAM_READ_BATCH}); 1: {@code read}. */
	private final int perRead;

	/**
	 * The window of each reader's {@link ReadStream} ({@code XSTREAM_READ_STREAM}); 0: no
	 * stream ({@link #perRead} decides).
	 */
	private final int streamWindow;

	/** 0: readers idle; 1: reading; 2: readers end. */
	private volatile int readState;

	private volatile int readSize = 1;

	/**
	 * {@code XSTREAM_SLOTS}: {@code spread} (default) WRITEs and a stream's READs go to
	 * consecutive slots of the server's region and a stream's READs into consecutive
	 * slices of the reader's target; {@code one}: all to slot 0 and slice 0, as perftest
	 * reads and writes one buffer; {@code alternate}: spread in the 1st, 3rd, ... phase,
	 * one in the 2nd, 4th, ... (an A/B of the memory the data touches within one boot).
	 */
	private final String slotPattern = System.getenv().getOrDefault("XSTREAM_SLOTS", "spread");

	/** Whether this phase uses slot 0 only ({@link #slotPattern}). */
	private volatile boolean oneSlot;

	private int phases;

	/**
	 * The data path's threads (this one, the pollers, the readers); the control threads.
	 */
	private final ThreadAllocation starter;

	private final ThreadAllocation control;

	private volatile Throwable readFailure;

	XstreamClient(RdmaConnection connection, XstreamBench.Sink sink, int readers) {
		this.connection = connection;
		this.perDoorbell = Integer.parseInt(System.getenv().getOrDefault("XSTREAM_BATCH", "1"));
		this.sendBatch = connection.newSendBatch();
		this.zeroCopy = "1".equals(System.getenv("XSTREAM_ZERO_COPY"));
		this.sink = sink;
		this.done = new AtomicLongArray(readers * 8);
		this.readerThreads = new Thread[readers];
		this.targets = new MemorySegment[readers];
		this.perRead = Integer.parseInt(System.getenv().getOrDefault("XSTREAM_READ_BATCH", "1"));
		this.streamWindow = Integer.parseInt(System.getenv().getOrDefault("XSTREAM_READ_STREAM", "0"));
		for (int i = 0; i < readers; i++) {
			int k = i;
			this.targets[i] = Arena.global().allocate((long) MESSAGE_SIZE * Math.max(perRead, streamWindow), 64);
			this.readerThreads[i] = Thread.ofPlatform().name("xstream-reader-" + i).daemon().start(() -> readLoop(k));
		}
		// once: made per phase, their streams and lambdas compiled inside the first
		// window
		this.starter = ThreadAllocation.of((t) -> t == Thread.currentThread() || t.getName().startsWith("rdma-poller-")
				|| t.getName().startsWith("xstream-reader-"));
		this.control = ThreadAllocation
			.of((t) -> t.getName().startsWith("rdma-") && !t.getName().startsWith("rdma-poller-"));
	}

	/**
	 * Warm-up, then REPS windows of one operation and size; prints their lines and
	 * returns the messages of the whole phase.
	 */
	long measure(String op, int size, double warmup, double window, int reps) throws InterruptedException {
		oneSlot = "one".equals(slotPattern) || ("alternate".equals(slotPattern) && phases % 2 == 1);
		if (phases++ == 0) {
			warmBoundaryReaders(300);
		}
		long before = count(op);
		MemorySegment data = source.asSlice(0, size);
		Progress.line(op + " " + size + " B: warm-up" + (oneSlot ? " (slot 0 only)" : ""));
		run(op, data, size, (long) (warmup * 1e9));
		Progress.line(op + " " + size + " B: warm-up done (" + (count(op) - before) + " messages), JIT wait");
		Jit.awaitQuiet();
		// the JIT settles only while the stream runs (stream and PollLoop.turn reached
		// C2 in the windows after 40-120 s of warm-up): streaming on until 3 s in a row
		// compiled nothing (1 s was not enough: 1,874 ms in run 49's windows)
		int settled = 0, quiet = 0;
		do {
			long jit = Jit.compilationMillis();
			run(op, data, size, TimeUnit.SECONDS.toNanos(1));
			warmBoundaryReaders(1);
			Jit.awaitQuiet();
			quiet = Jit.compilationMillis() == jit ? quiet + 1 : 0;
		}
		while (quiet < QUIET_SECONDS && ++settled < SETTLE_SECONDS);
		Progress.line(op + " " + size + " B: measuring (" + (settled + 1) + " s of streaming after the JIT's wait, "
				+ quiet + " s without compilation at the end)");
		double[] rate = new double[reps];
		double[] mbps = new double[reps];
		double[] cpu = new double[reps];
		double[] alloc = new double[reps];
		long[] allocRaw = new long[reps];
		long windowNanos = (long) (window * 1e9);
		// the readers stream on from the warm-up: restarting them here deoptimized their
		// loop, compiled again 1.7 s into the first window (run 40)
		// the instruction-count mode (BENCH_INSNS=1): a group of REPS windows, their
		// messages marked after them ("C n1 n2 ..."); nothing when it is off
		MemorySegment insnGroup = InsnMark.label("B case=xstream_" + op + " impl=java size=" + size);
		long[] windowMessages = new long[reps];
		long[] losses0 = Retransmissions.read();
		long[] guest0 = GuestCpu.read();
		Map<String, Long> switches0 = ThreadSwitches.read();
		long guestCount0 = count(op);
		long jit0 = Jit.compilationMillis();
		long[] perThread0 = starter.perThread();
		long[] controlThread0 = control.perThread();
		long[] allRaw = new long[reps];
		// a window's boundaries: [nanoTime, messages, process CPU, data-path bytes, all
		// bytes], read into arrays made here (nothing allocated between the boundaries)
		long[] from = new long[5];
		long[] to = new long[5];
		InsnMark.mark(insnGroup);
		InsnMark.mark(InsnMark.BOUNDARY);
		boundary(op, starter, from);
		for (int r = 0; r < reps; r++) {
			long end = from[0] + windowNanos;
			if ("read".equals(op)) {
				// one wait to the window's end: waking every 5 ms was 180-190 of
				// the JVM's 720-810 context switches a second (run 37)
				parkUntil(end);
				failIfReadFailed();
			}
			else {
				stream(op, data, size, end);
			}
			InsnMark.mark(InsnMark.BOUNDARY);
			boundary(op, starter, to);
			long n = Math.max(1, to[1] - from[1]);
			windowMessages[r] = to[1] - from[1];
			rate[r] = n / ((to[0] - from[0]) / 1e9);
			mbps[r] = rate[r] * size / 1048576.0;
			cpu[r] = (to[2] - from[2]) / 1e3 / n;
			allocRaw[r] = to[3] - from[3];
			allRaw[r] = to[4] - from[4];
			alloc[r] = (to[3] - from[3]) / (double) n;
			long[] next = from;
			from = to;
			to = next;
		}
		InsnMark.mark(InsnMark.END);
		long jit1 = Jit.compilationMillis(); // before the readings below: not theirs
		long[] perThread1 = starter.perThread();
		long[] controlThread1 = control.perThread();
		long guestCount1 = count(op);
		long[] guest1 = GuestCpu.read();
		Map<String, Long> switches1 = ThreadSwitches.read();
		if (InsnMark.ON) {
			StringBuilder counts = new StringBuilder("C");
			for (long m : windowMessages) {
				counts.append(' ').append(m);
			}
			InsnMark.mark(InsnMark.label(counts.toString()));
		}
		double seconds = window * reps;
		if ("read".equals(op)) {
			readState = 0;
		}
		long[] losses1 = Retransmissions.read();
		Progress.line(op + " " + size + " B: measured; settling");
		long total = settle(op) - before;
		String extra = " op=" + op + " size=" + size;
		System.out.println("# xstream " + op + " " + size + " B: over the measured windows "
				+ Retransmissions.describe(losses0, losses1) + "; "
				+ GuestCpu.describe(guest0, guest1, guestCount1 - guestCount0) + "; JIT compilation over the windows "
				+ (jit1 - jit0) + " ms; "
				+ ThreadSwitches.describe(switches0, switches1, seconds, guestCount1 - guestCount0));
		report("xstream_mbps", extra, "MB/s", mbps);
		report("xstream_rate", extra, "msgs/s", rate);
		report("xstream_cpu", extra, "us_per_message", cpu);
		report("alloc", " of=xstream_" + op + "_" + size, "B_per_message", alloc);
		System.out.printf(Locale.ROOT,
				"# xstream %s %d B: %d messages in the phase; bytes allocated per window by the data path's "
						+ "threads: %s; by all threads of the JVM: %s; per data-path thread over the windows: "
						+ "%s; the starter's control threads (not per message: their idle loops) per second: " + "%s%n",
				op, size, total, Arrays.toString(allocRaw), Arrays.toString(allRaw),
				starter.describe(perThread0, perThread1, 1), control.describe(controlThread0, controlThread1, seconds));
		return total;
	}

	/**
	 * A window boundary into {@code into}: {@code System.nanoTime()}, the operation's
	 * messages, the process's CPU time, the data path's allocated bytes, every thread's
	 * allocated bytes; allocates nothing.
	 */
	private void boundary(String op, ThreadAllocation starter, long[] into) {
		into[0] = System.nanoTime();
		into[1] = count(op);
		into[2] = os.getProcessCpuTime();
		into[3] = starter.allocated();
		into[4] = threads.getTotalThreadAllocatedBytes();
	}

	/**
	 * Streams until the reads are stopped and the sends delivered; returns the count
	 * after that.
	 */
	private long settle(String op) throws InterruptedException {
		if ("read".equals(op)) {
			// the readers finish their READ in flight
			Thread.sleep(200);
			failIfReadFailed();
			return count(op);
		}
		if ("send".equals(op)) {
			long sent = posted;
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
			while (sink.received < sent && System.nanoTime() < deadline) {
				Thread.sleep(5);
			}
			if (sink.received != sent) {
				throw new IllegalStateException(
						"sent " + sent + " messages, the server received " + sink.received + " within 60 s");
			}
		}
		return count(op);
	}

	/** The operation's messages so far: received by the server, posted, or read. */
	private long count(String op) {
		return switch (op) {
			case "send" -> sink.received;
			case "write" -> posted;
			default -> {
				long n = 0;
				for (int i = 0; i < done.length(); i += 8) {
					n += done.get(i);
				}
				yield n;
			}
		};
	}

	/** Streams for {@code nanos}; READs go on until {@link #measure}'s windows end. */
	private void run(String op, MemorySegment data, int size, long nanos) throws InterruptedException {
		long end = System.nanoTime() + nanos;
		if ("read".equals(op)) {
			readSize = size;
			readState = 1;
			while (System.nanoTime() < end) {
				pause(5); // not Thread.sleep: 40 B per call
				failIfReadFailed();
			}
			return;
		}
		stream(op, data, size, end);
	}

	/**
	 * Reads what a phase's boundaries and the JIT's wait read, {@code times} times for
	 * nothing, so that their JDK code (files, readers, strings, diagnostic commands)
	 * reaches C2 before the first warm-up ends, not in a window (runs 40, 44).
	 */
	private static void warmBoundaryReaders(int times) {
		for (int i = 0; i < times; i++) {
			Retransmissions.read();
			GuestCpu.read();
			ThreadSwitches.read();
			Jit.compilerQueue();
		}
	}

	/**
	 * Sends or writes {@code data} until {@code end} (System.nanoTime); sends go out
	 * {@link #perDoorbell} at a time through {@link #sendBatch} when it is above 1, from
	 * borrowed buffers without a copy when {@link #zeroCopy}.
	 */
	private void stream(String op, MemorySegment data, int size, long end) {
		boolean send = "send".equals(op);
		int slots = oneSlot ? 1 : REGION / size;
		long n = posted;
		do {
			if (send && perDoorbell > 1) {
				for (int i = 0; i < BATCH; i += perDoorbell) {
					for (int k = 0; k < perDoorbell; k++) {
						if (zeroCopy) {
							sendBatch.add(connection.borrowSendBuffer(), size);
						}
						else {
							sendBatch.add(data);
						}
					}
					sendBatch.send();
					n += perDoorbell;
				}
			}
			else {
				for (int i = 0; i < BATCH; i++) {
					if (send && zeroCopy) {
						connection.borrowSendBuffer().send(size);
					}
					else if (send) {
						connection.send(data);
					}
					else if (zeroCopy) {
						connection.borrowSendBuffer().write((n % slots) * size, size);
					}
					else {
						connection.write((n % slots) * size, data);
					}
					n++;
				}
			}
			posted = n;
		}
		while (System.nanoTime() < end);
	}

	/**
	 * Reader {@code k}: {@link RdmaConnection#read} of one message at a time, or with
	 * {@link #perRead} above 1 a {@link ReadBatch} of that many READs per call, each into
	 * its own slice of the reader's target, from consecutive slots of the server's
	 * region; with {@link #streamWindow} above 0 a {@link ReadStream} of that window
	 * instead, one READ per submit into slice {@code n % window}, which the READ
	 * {@code window} earlier was reaped from before it is posted.
	 */
	private void readLoop(int k) {
		if (streamWindow > 0) {
			streamLoop(k);
			return;
		}
		long slot = k;
		int size = 0;
		MemorySegment target = targets[k];
		MemorySegment[] pieces = new MemorySegment[perRead];
		ReadBatch batch = connection.newReadBatch();
		try {
			while (readState != 2) {
				if (readState != 1) {
					// 1 ms here cost ~5 ms of emulated CPU per message (run 3)
					pause(50);
					continue;
				}
				if (size != readSize) {
					// a new size: new views (not per message)
					size = readSize;
					target = targets[k].asSlice(0, size);
					for (int i = 0; i < perRead; i++) {
						pieces[i] = targets[k].asSlice((long) i * size, size);
					}
				}
				int slots = REGION / size;
				if (perRead == 1) {
					connection.read((slot % slots) * size, target);
				}
				else {
					for (int i = 0; i < perRead; i++) {
						batch.add(((slot + i) % slots) * size, pieces[i]);
					}
					batch.read();
				}
				slot += perRead;
				done.lazySet(k * 8, done.get(k * 8) + perRead);
			}
		}
		catch (Throwable ex) {
			readFailure = ex;
		}
	}

	private void streamLoop(int k) {
		long slot = k;
		int size = 0;
		int n = 0;
		MemorySegment[] pieces = new MemorySegment[streamWindow];
		try (ReadStream stream = connection.newReadStream(streamWindow)) {
			while (readState != 2) {
				if (readState != 1) {
					stream.flush();
					pause(50);
					continue;
				}
				if (size != readSize) {
					stream.flush(); // a new size: new views (not per message)
					size = readSize;
					for (int i = 0; i < streamWindow; i++) {
						pieces[i] = targets[k].asSlice((long) i * size, size);
					}
				}
				boolean one = oneSlot;
				int slots = one ? 1 : REGION / size;
				long before = stream.completed();
				long after = stream.submit((slot % slots) * size, pieces[one ? 0 : n]);
				n = n + 1 == streamWindow ? 0 : n + 1;
				slot++;
				if (after != before) {
					done.lazySet(k * 8, done.get(k * 8) + (after - before));
				}
			}
		}
		catch (Throwable ex) {
			readFailure = ex;
		}
	}

	/**
	 * Waits {@code millis} without allocating (a measured thread's idle wait:
	 * {@code Thread.sleep} allocates 40 bytes per call on JDK 25.0, {@code parkNanos}
	 * none).
	 */
	private static void pause(long millis) throws InterruptedException {
		parkUntil(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis));
	}

	/** Parks until {@code deadline} ({@link System#nanoTime()}), allocating nothing. */
	private static void parkUntil(long deadline) throws InterruptedException {
		for (long left; (left = deadline - System.nanoTime()) > 0;) {
			LockSupport.parkNanos(left);
			if (Thread.interrupted()) {
				throw new InterruptedException();
			}
		}
	}

	private void failIfReadFailed() {
		Throwable f = readFailure;
		if (f != null) {
			throw new IllegalStateException("a reader failed: " + f, f);
		}
	}

	void stopReads() {
		readState = 0;
	}

	void close() {
		readState = 2;
	}

}
