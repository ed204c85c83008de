package dev.rdma.verbs.apisequence;

import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.CqCreateFlag;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.Errno;
import dev.rdma.verbs.ExtendedCompletionQueue;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.Waker;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static dev.rdma.verbs.CompletionChannel.WaitResult.READY;
import static dev.rdma.verbs.CompletionChannel.WaitResult.TIMEOUT;
import static dev.rdma.verbs.CompletionChannel.WaitResult.WOKEN;

/**
 * One seeded random sequence of public-API actions over a pool of objects on one
 * {@link Context}: channels, legacy and extended CQs, buffers and loopback QPs, with the
 * model the actions are checked against. Every action states its allowed outcomes (the
 * contract in docs/reliability.md, "Random API sequences"); anything else throws
 * {@link SequenceFailure}. The model tracks every posted work request: a completion must
 * belong to an outstanding one of that CQ (else phantom), arrive once (else duplicate),
 * and, when its QP and CQ stay open, arrive by the final drain (else lost).
 *
 * <p>
 * The actions on the sequence's own thread are a pure function of the seed; what several
 * threads do at once, and how many completions a poll finds, depend on timing.
 */
final class ApiSequence {

	private static final int SLOT = 64;

	private static final int MAX_DEPTH = 8;

	private static final long MS = 1_000_000L;

	/**
	 * Slack for timing checks under TCG emulation (a busy 2-core host): a bounded call
	 * returns within bound + this.
	 */
	private static final long SLACK_MS = 5_000;

	private static final Class<?>[] MISUSE = { IllegalStateException.class, IllegalArgumentException.class,
			VerbsException.class };

	private static final Class<?>[] ISE = { IllegalStateException.class };

	// ------------------------------------------------------------------ the model's
	// objects

	/**
	 * What every object of the model has: its name in the log and whether the model
	 * closed it.
	 */
	abstract static class Obj {

		final String name;

		volatile boolean closed;

		Obj(String name) {
			this.name = name;
		}

		@Override
		public String toString() {
			return name;
		}

	}

	static final class Chan extends Obj {

		final CompletionChannel ch;

		Chan(String name, CompletionChannel ch) {
			super(name);
			this.ch = ch;
		}

	}

	static final class Cq extends Obj {

		final CompletionQueue q;

		final ExtendedCompletionQueue x;

		final Chan chan;

		/** Events the model saw getEvent return for this CQ. */
		final AtomicLong got = new AtomicLong();

		/**
		 * Refused polls of this CQ (where a broken binding would have taken completions),
		 * for lost-work reports.
		 */
		final List<String> refusedPolls = Collections.synchronizedList(new ArrayList<>());

		Cq(String name, CompletionQueue q, Chan chan) {
			super(name);
			this.q = q;
			this.x = q instanceof ExtendedCompletionQueue e ? e : null;
			this.chan = chan;
		}

		boolean ext() {
			return x != null;
		}

		@Override
		public String toString() {
			return name + (x != null ? "(ext)" : "(legacy)");
		}

	}

	static final class Buf extends Obj {

		final WorkCompletionBuffer b;

		Buf(String name, WorkCompletionBuffer b) {
			super(name);
			this.b = b;
		}

		@Override
		public String toString() {
			return name + "[" + b.capacity() + "]";
		}

	}

	static final class Qp extends Obj {

		final LoopbackQueuePair lb;

		final Cq send;

		final Cq recv;

		final int depth;

		/**
		 * Posted and not yet seen completed: never more than depth (so no CQ can
		 * overrun).
		 */
		final AtomicInteger outSend = new AtomicInteger();

		final AtomicInteger outRecv = new AtomicInteger();

		volatile boolean error;

		Qp(String name, LoopbackQueuePair lb, Cq send, Cq recv, int depth) {
			super(name);
			this.lb = lb;
			this.send = send;
			this.recv = recv;
			this.depth = depth;
		}

	}

	static final class Wr {

		final long id;

		final Qp qp;

		final boolean send;

		final Cq cq;

		final String postedBy;

		String seenBy;

		Wr(long id, Qp qp, boolean send, String postedBy) {
			this.id = id;
			this.qp = qp;
			this.send = send;
			this.cq = send ? qp.send : qp.recv;
			this.postedBy = postedBy;
		}

		@Override
		public String toString() {
			return "wr_id " + id + " (" + (send ? "send" : "recv") + " on " + qp + " -> " + cq + ", posted by "
					+ postedBy + ")";
		}

	}

	record Result<T>(T value, Throwable error, long nanos) {
		long millis() {
			return nanos / MS;
		}
	}

	interface Call<T> {

		T call() throws Exception;

	}

	interface VoidCall {

		void call() throws Exception;

	}

	// ------------------------------------------------------------------ state

	private final long seed;

	private final SplittableRandom rnd;

	/**
	 * Draws each channel's wait mode, apart from {@link #rnd}: a seed's actions are the
	 * same as before the mode existed.
	 */
	private final SplittableRandom modes;

	private final SequenceConfig cfg;

	private final Stats stats;

	private final Progress progress;

	private final Set<Kind> focus;

	/**
	 * NativeObjects.open() before the sequence: the model adds its context, channels, CQs
	 * and QPs (PD+MR+QP).
	 */
	private final long baseline;

	private Context ctx;

	private int maxCqe;

	private int vectors;

	private Waker waker;

	private final List<Chan> chans = new ArrayList<>();

	private final List<Cq> cqs = new ArrayList<>();

	private final List<Buf> bufs = new ArrayList<>();

	private final List<Qp> qps = new ArrayList<>();

	private final Map<CompletionQueue, Cq> byQueue = new ConcurrentHashMap<>();

	private final Map<Long, Wr> wrs = new ConcurrentHashMap<>();

	private final AtomicLong nextWrId = new AtomicLong(1);

	private final List<AutoCloseable> temps = Collections.synchronizedList(new ArrayList<>());

	private final List<Throwable> threadFailures = Collections.synchronizedList(new ArrayList<>());

	private int step;

	private Kind kind;

	private String label = "#0";

	private int names;

	ApiSequence(long seed, Set<Kind> focus, SequenceConfig cfg, Stats stats, Progress progress, long baseline) {
		this.seed = seed;
		this.baseline = baseline;
		this.rnd = new SplittableRandom(seed);
		this.modes = new SplittableRandom(~seed);
		this.cfg = cfg;
		this.stats = stats;
		this.progress = progress;
		this.focus = focus;
	}

	// ------------------------------------------------------------------ the sequence

	void run() {
		progress.begin("open context", cfg.actionTimeoutMillis());
		ctx = DeviceTestSupport.openContext();
		maxCqe = ctx.queryDevice().maxCqe();
		vectors = ctx.numCompVectors();
		waker = temp(new Waker());
		progress.end();
		// a random start that makes every kind applicable: a channel, a legacy and an
		// extended CQ, buffers, QPs
		List<Kind> prefix = new ArrayList<>();
		if (chance(0.7)) {
			prefix.add(Kind.CREATE_CHANNEL);
		}
		prefix.add(Kind.CREATE_CQ);
		prefix.add(Kind.CREATE_EXT_CQ);
		if (chance(0.3)) {
			prefix.add(chance(0.5) ? Kind.CREATE_CQ : Kind.CREATE_EXT_CQ);
		}
		Collections.shuffle(prefix, new java.util.Random(rnd.nextLong()));
		prefix.add(Kind.CREATE_BUFFER);
		if (chance(0.5)) {
			prefix.add(Kind.CREATE_BUFFER);
		}
		prefix.add(Kind.CREATE_QP);
		if (chance(0.5)) {
			prefix.add(Kind.CREATE_QP);
		}
		for (Kind k : prefix) {
			if (cfg.included(k) && applicable(k)) {
				act(k);
			}
		}
		int n = cfg.maxActions() / 3 + rnd.nextInt(cfg.maxActions() - cfg.maxActions() / 3 + 1);
		for (int i = 0; i < n; i++) {
			Kind k = pick();
			if (k != null) {
				act(k);
			}
		}
		finalDrain();
		teardown();
	}

	/**
	 * After a failure: close what can be closed (the caller bounds the time this takes).
	 */
	void abandon() {
		closeTemps();
		if (ctx != null) {
			ctx.close();
		}
	}

	private Kind pick() {
		List<Kind> kinds = new ArrayList<>();
		int total = 0;
		for (Kind k : Kind.values()) {
			if (cfg.included(k)) {
				kinds.add(k);
				total += weight(k);
			}
		}
		if (total == 0) {
			return null;
		}
		for (int attempt = 0; attempt < 30; attempt++) {
			int r = rnd.nextInt(total);
			for (Kind k : kinds) {
				r -= weight(k);
				if (r < 0) {
					if (applicable(k)) {
						return k;
					}
					break;
				}
			}
		}
		return null;
	}

	private int weight(Kind k) {
		return focus.contains(k) ? k.weight() * 8 + 8 : k.weight();
	}

	private boolean applicable(Kind k) {
		List<Cq> open = openCqs();
		return switch (k) {
			case CREATE_CHANNEL -> openChans().size() < 3;
			case CREATE_CQ, CREATE_EXT_CQ -> open.size() < 6;
			case CREATE_BUFFER -> openBufs().size() < 5;
			case CREATE_QP -> openQps().size() < 4 && !open.isEmpty();
			case CREATE_MISUSE -> true;
			case CLOSE_QP -> !openQps().isEmpty();
			case CLOSE_CQ, RESIZE, REQUEST_NOTIFY, STALE_VIEW, READ_CLOSED_BUFFER, NESTED_CLOSE, NESTED_OTHER,
					CLOSE_BUFFER_DURING_POLL, PARALLEL ->
				!open.isEmpty();
			case CLOSE_CHANNEL, GET_EVENT, AWAIT, WAKE, CLOSE_CHANNEL_DURING_WAIT -> !openChans().isEmpty();
			case CLOSE_BUFFER -> !openBufs().isEmpty();
			case USE_CLOSED -> chans.stream().anyMatch(c -> c.closed) || cqs.stream().anyMatch(c -> c.closed)
					|| bufs.stream().anyMatch(b -> b.closed) || qps.stream().anyMatch(q -> q.closed);
			case POST, QP_ERROR -> !liveQps().isEmpty();
			case POLL, POLL_HANDLER -> !open.isEmpty() && !openBufs().isEmpty();
			case POLL_CLOSED_BUFFER, NESTED_LEGACY, WAIT_FOR_POLL, CONCURRENT_POLL ->
				open.stream().anyMatch(c -> !c.ext());
			case POLL_CLOSED_BUFFER_EXTENDED, RAW_ITERATOR, NESTED_EXTENDED, BATCH_REENTRY, WAIT_FOR_POLL_EXTENDED,
					CONCURRENT_EXTENDED ->
				open.stream().anyMatch(Cq::ext);
			case NESTED_SAME_BUFFER -> open.size() >= 2;
			case CLOSE_CQ_DURING_POLL -> open.size() < 6 && openQps().size() < 4;
			case ACK_EVENTS -> open.stream().anyMatch(c -> c.chan != null);
			case CHANNEL_REFUSED_CLOSE -> open.stream().anyMatch(c -> c.chan != null);
		};
	}

	private long timeoutOf(Kind k) {
		long t = cfg.actionTimeoutMillis();
		return switch (k) {
			case CLOSE_CQ_DURING_POLL, CLOSE_BUFFER_DURING_POLL, PARALLEL, CONCURRENT_POLL, CONCURRENT_EXTENDED,
					WAIT_FOR_POLL, WAIT_FOR_POLL_EXTENDED, CHANNEL_REFUSED_CLOSE, CLOSE_CHANNEL_DURING_WAIT,
					BATCH_REENTRY, CLOSE_CQ, NESTED_CLOSE ->
				t + 10_000;
			default -> t;
		};
	}

	private void act(Kind k) {
		step++;
		kind = k;
		label = "#" + step + " " + k.id();
		progress.begin(label, timeoutOf(k));
		stats.action(k);
		switch (k) {
			case CREATE_CHANNEL -> createChannel();
			case CREATE_CQ -> createCq(false);
			case CREATE_EXT_CQ -> createCq(true);
			case CREATE_BUFFER -> createBuffer();
			case CREATE_QP -> createQp();
			case CREATE_MISUSE -> createMisuse();
			case CLOSE_QP -> closeQp(any(openQps()));
			case CLOSE_CQ -> closeCq(any(openCqs()));
			case CLOSE_CHANNEL -> closeChannel(any(openChans()));
			case CLOSE_BUFFER -> closeBuffer(any(openBufs()));
			case USE_CLOSED -> useClosed();
			case POST -> post();
			case QP_ERROR -> qpError(any(liveQps()));
			case POLL -> poll(false);
			case POLL_HANDLER -> poll(true);
			case READ_CLOSED_BUFFER -> readClosedBuffer();
			case STALE_VIEW -> staleView();
			case POLL_CLOSED_BUFFER -> pollClosedBuffer(false);
			case POLL_CLOSED_BUFFER_EXTENDED -> pollClosedBuffer(true);
			case RAW_ITERATOR -> rawIterator();
			case NESTED_LEGACY -> nestedSameCq(false);
			case NESTED_EXTENDED -> nestedSameCq(true);
			case BATCH_REENTRY -> batchReentry();
			case NESTED_CLOSE -> nestedClose();
			case NESTED_SAME_BUFFER -> nestedSameBuffer();
			case NESTED_OTHER -> nestedOther();
			case WAIT_FOR_POLL -> waitForPoll(false);
			case WAIT_FOR_POLL_EXTENDED -> waitForPoll(true);
			case CLOSE_CQ_DURING_POLL -> closeCqDuringPoll();
			case CLOSE_BUFFER_DURING_POLL -> closeBufferDuringPoll();
			case CONCURRENT_POLL -> concurrentPoll(false);
			case CONCURRENT_EXTENDED -> concurrentPoll(true);
			case PARALLEL -> parallel();
			case RESIZE -> resize();
			case REQUEST_NOTIFY -> requestNotify();
			case GET_EVENT -> getEvent();
			case AWAIT -> await();
			case ACK_EVENTS -> ackEvents();
			case WAKE -> wake();
			case CHANNEL_REFUSED_CLOSE -> channelRefusedClose();
			case CLOSE_CHANNEL_DURING_WAIT -> closeChannelDuringWait();
		}
		checkInvariants();
		progress.end();
	}

	private void trace(String s) {
		progress.line("   " + s);
	}

	// ------------------------------------------------------------------ creation

	private Chan createChannel() {
		CompletionChannel.WaitMode mode = modes.nextBoolean() ? CompletionChannel.WaitMode.BLOCKING_READ
				: CompletionChannel.WaitMode.POLL;
		Chan c = new Chan("ch" + names++,
				ok("createCompletionChannel(" + mode + ")", attempt(() -> ctx.createCompletionChannel(mode))));
		chans.add(c);
		trace("created " + c + " (" + mode + ")");
		return c;
	}

	private Cq createCq(boolean ext) {
		List<Chan> open = openChans();
		Chan chan = !open.isEmpty() && chance(0.6) ? any(open) : null;
		int cqe = new int[] { 1, 2, 4, 8, 16, 33, 64, 128 }[rnd.nextInt(8)];
		int vector = rnd.nextInt(vectors);
		String what;
		CompletionQueue q;
		if (ext) {
			EnumSet<WcExFlag> flags = EnumSet.noneOf(WcExFlag.class);
			for (WcExFlag f : EnumSet.range(WcExFlag.BYTE_LEN, WcExFlag.DLID_PATH_BITS)) {
				if (chance(0.5)) {
					flags.add(f);
				}
			}
			Set<CqCreateFlag> create = chance(0.2) ? EnumSet.of(CqCreateFlag.SINGLE_THREADED) : Set.of();
			CqInitAttributes a = CqInitAttributes.of(cqe)
				.withChannel(chan == null ? null : chan.ch)
				.withCompVector(vector)
				.withWcFlags(flags)
				.withFlags(create);
			what = "createExtendedCompletionQueue(cqe " + cqe + ", " + chan + ", vector " + vector + ", " + flags + ", "
					+ create + ")";
			q = ok(what, attempt(() -> ctx.createExtendedCompletionQueue(a)));
		}
		else {
			what = "createCompletionQueue(" + cqe + ", " + chan + ", " + vector + ")";
			q = ok(what, attempt(() -> ctx.createCompletionQueue(cqe, chan == null ? null : chan.ch, vector)));
		}
		Cq cq = new Cq("cq" + names++, q, chan);
		cqs.add(cq);
		byQueue.put(q, cq);
		trace(cq + " = " + what + ": cqe " + q.cqe());
		return cq;
	}

	private Buf createBuffer() {
		int cap = 1 + rnd.nextInt(8);
		Buf b = new Buf("buf" + names++,
				ok("new WorkCompletionBuffer(" + cap + ")", attempt(() -> new WorkCompletionBuffer(cap))));
		bufs.add(b);
		trace("created " + b);
		return b;
	}

	private Qp createQp() {
		List<Cq> open = openCqs();
		Cq send = any(open);
		Cq recv = chance(0.3) ? send : any(open);
		return createQp(send, recv, 1 + rnd.nextInt(MAX_DEPTH));
	}

	/**
	 * A loopback QP of at most {@code depth}, after growing its CQs when they could not
	 * hold its completions.
	 */
	private Qp createQp(Cq send, Cq recv, int depth) {
		for (Cq cq : send == recv ? List.of(send) : List.of(send, recv)) {
			int need = committed(cq) + (send == recv ? 2 : 1) * depth;
			if (cq.q.cqe() < need) {
				int target = need + rnd.nextInt(16);
				ok(cq + ".resize(" + target + ") to make room for a QP", run(() -> cq.q.resize(target)));
				trace("resized " + cq + " to " + cq.q.cqe() + " (room for a QP)");
			}
		}
		LoopbackQueuePair lb = ok("new LoopbackQueuePair(" + send + ", " + recv + ", depth " + depth + ")",
				attempt(() -> new LoopbackQueuePair(ctx, send.q, recv.q, depth, SLOT)));
		Qp qp = new Qp("qp" + names++, lb, send, recv, depth);
		qps.add(qp);
		trace("created " + qp + ": send " + send + ", recv " + recv + ", depth " + depth);
		return qp;
	}

	private void createMisuse() {
		String did = createMisuseOnce();
		trace(did + ": refused");
	}

	private String createMisuseOnce() {
		List<Chan> closedChans = chans.stream().filter(c -> c.closed).toList();
		List<Cq> closedCqs = cqs.stream().filter(c -> c.closed).toList();
		int v = rnd.nextInt(8);
		if (!closedCqs.isEmpty() && chance(0.3)) {
			v = 6; // a QP on a closed CQ: the refusal must leave nothing behind (a PD or
					// CQ use count once leaked)
		}
		int bad = new int[] { 0, -1, maxCqe + 1 }[rnd.nextInt(3)];
		switch (v) {
			case 0 -> {
				return misuseCreate("createCompletionQueue(" + bad + ", null, 0)",
						() -> ctx.createCompletionQueue(bad, null, 0));
			}
			case 1 -> {
				int vector = chance(0.5) ? -1 : vectors;
				return misuseCreate("createCompletionQueue(4, null, vector " + vector + ")",
						() -> ctx.createCompletionQueue(4, null, vector));
			}
			case 2 -> {
				return misuseCreate("createExtendedCompletionQueue(cqe " + bad + ")",
						() -> ctx.createExtendedCompletionQueue(CqInitAttributes.of(bad)));
			}
			case 3 -> {
				// unsupported on rxe (EOPNOTSUPP); a device that has it creates the CQ,
				// which is closed again
				Result<ExtendedCompletionQueue> r = attempt(() -> ctx.createExtendedCompletionQueue(
						CqInitAttributes.of(4).withWcFlags(EnumSet.of(WcExFlag.COMPLETION_TIMESTAMP))));
				if (okOrRefused("createExtendedCompletionQueue(COMPLETION_TIMESTAMP)", r, MISUSE)) {
					ok("close", run(r.value()::close));
				}
				return "createExtendedCompletionQueue(COMPLETION_TIMESTAMP)";
			}
			case 4 -> {
				int cap = new int[] { 0, -1, 65537 }[rnd.nextInt(3)];
				refused("new WorkCompletionBuffer(" + cap + ")", attempt(() -> new WorkCompletionBuffer(cap)),
						IllegalArgumentException.class);
				return "new WorkCompletionBuffer(" + cap + ")";
			}
			case 5 -> {
				if (!closedChans.isEmpty()) {
					Chan c = any(closedChans);
					return misuseCreate("createCompletionQueue(4, closed " + c + ", 0)",
							() -> ctx.createCompletionQueue(4, c.ch, 0));
				}
				return misuseCreate("createExtendedCompletionQueue(vector " + vectors + ")",
						() -> ctx.createExtendedCompletionQueue(CqInitAttributes.of(4).withCompVector(vectors)));
			}
			case 6 -> {
				if (!closedCqs.isEmpty() && !openCqs().isEmpty()) {
					Cq closed = any(closedCqs);
					Cq open = any(openCqs());
					boolean sendClosed = chance(0.5);
					String what = "new LoopbackQueuePair(send " + (sendClosed ? closed + " (closed)" : open) + ", recv "
							+ (sendClosed ? open : closed + " (closed)") + ")";
					Result<LoopbackQueuePair> r = attempt(
							() -> sendClosed ? new LoopbackQueuePair(ctx, closed.q, open.q, 2, SLOT)
									: new LoopbackQueuePair(ctx, open.q, closed.q, 2, SLOT));
					if (r.error() == null) {
						r.value().close();
					}
					refused(what, r, MISUSE);
					return what;
				}
				refused("new WorkCompletionBuffer(0)", attempt(() -> new WorkCompletionBuffer(0)),
						IllegalArgumentException.class);
				return "new WorkCompletionBuffer(0)";
			}
			default -> {
				if (openCqs().isEmpty()) {
					refused("new WorkCompletionBuffer(-1)", attempt(() -> new WorkCompletionBuffer(-1)),
							IllegalArgumentException.class);
					return "new WorkCompletionBuffer(-1)";
				}
				Cq cq = any(openCqs());
				int n = chance(0.5) ? -1 : (int) cq.q.eventsUnacked() + 1 + rnd.nextInt(3);
				refused(cq + ".ackEvents(" + n + ")", run(() -> cq.q.ackEvents(n)), IllegalArgumentException.class);
				return cq + ".ackEvents(" + n + ")";
			}
		}
	}

	private String misuseCreate(String what, Call<CompletionQueue> c) {
		Result<CompletionQueue> r = attempt(c);
		if (r.error() == null) {
			r.value().close();
			throw new SequenceFailure(label + ": " + what + " was accepted (" + r.value() + "); expected a refusal");
		}
		refused(what, r, MISUSE);
		return what;
	}

	// ------------------------------------------------------------------ closing

	private void closeQp(Qp qp) {
		ok(qp + ".close()", run(qp.lb::close));
		qp.closed = true;
		trace("closed " + qp + " (" + (qp.outSend.get() + qp.outRecv.get()) + " work requests unpolled)");
	}

	private void closeCq(Cq cq) {
		List<Qp> users = usersOf(cq);
		Result<Void> r = run(cq.q::close);
		if (!users.isEmpty()) {
			refusedBusy(cq + ".close() while " + users + " use it", r);
			if (cq.q.isClosed()) {
				throw failure(cq + " reports closed after its close() was refused");
			}
			// still fully usable
			pollOnce(cq, temp(new WorkCompletionBuffer(4)), chance(0.5), cq + " after the refused close", false);
			trace(cq + ".close() refused (EBUSY, used by " + users + "), still usable");
			return;
		}
		ok(cq + ".close()", r);
		markClosed(cq);
		trace("closed " + cq);
	}

	private void markClosed(Cq cq) {
		cq.closed = true;
		if (!cq.q.isClosed()) {
			throw failure(cq + ": close() returned but isClosed() is false");
		}
		if (cq.chan != null && cq.q.eventsAcked() != cq.q.eventsGot()) {
			throw failure(cq + " closed with events got " + cq.q.eventsGot() + " but acked " + cq.q.eventsAcked()
					+ ": close() must ack what is outstanding");
		}
	}

	private void closeChannel(Chan c) {
		List<Cq> on = cqsOn(c);
		Result<Void> r = run(c.ch::close);
		if (!on.isEmpty()) {
			refusedBusy(c + ".close() with " + on + " on it", r);
			if (c.ch.isClosed()) {
				throw failure(c + " reports closed after its close() was refused");
			}
			if (cfg.included(Kind.CHANNEL_REFUSED_CLOSE)) {
				// as before the refused close: a look (timeout 0) is never WOKEN (a check
				// of channelRefusedClose)
				Result<CompletionChannel.WaitResult> look = attempt(() -> c.ch.await(0, waker));
				CompletionChannel.WaitResult w = ok(c + ".await(0) after a refused close", look);
				if (w == WOKEN) {
					throw failure(c + ".await(0, unsignalled waker) returned WOKEN after a refused close()");
				}
				trace(c + ".close() refused (EBUSY, " + on + "), await(0) -> " + w);
			}
			else {
				trace(c + ".close() refused (EBUSY, " + on + ")");
			}
			return;
		}
		ok(c + ".close()", r);
		c.closed = true;
		trace("closed " + c);
	}

	private void closeBuffer(Buf b) {
		ok(b + ".close()", run(b.b::close));
		if (chance(0.3)) {
			ok(b + ".close() again", run(b.b::close));
		}
		b.closed = true;
		trace("closed " + b);
	}

	private void useClosed() {
		List<Object> closed = new ArrayList<>();
		chans.stream().filter(c -> c.closed).forEach(closed::add);
		cqs.stream().filter(c -> c.closed).forEach(closed::add);
		bufs.stream().filter(b -> b.closed).forEach(closed::add);
		qps.stream().filter(q -> q.closed).forEach(closed::add);
		Object o = any(closed);
		int v = rnd.nextInt(12);
		switch (o) {
			case Cq cq -> {
				WorkCompletionBuffer b = temp(new WorkCompletionBuffer(4));
				switch (v % (cq.ext() ? 11 : 8)) {
					case 0 -> refused(cq + ".poll(buffer) after close", attempt(() -> cq.q.poll(b)), ISE);
					case 1 -> refused(cq + ".poll(buffer, handler) after close",
							attempt(() -> cq.q.poll(b, wc -> record(cq, wc, label))), ISE);
					case 2 -> refused(cq + ".resize(16) after close", run(() -> cq.q.resize(16)), ISE);
					case 3 -> refused(cq + ".requestNotify after close", run(() -> cq.q.requestNotify(false)), ISE);
					case 4 -> refused(cq + ".cqe() after close", attempt(cq.q::cqe), ISE);
					case 5 -> {
						Result<Integer> r = attempt(cq.q::ackEvents);
						if (okOrRefused(cq + ".ackEvents() after close", r, ISE) && r.value() != 0) {
							throw failure(cq + ".ackEvents() after close acked " + r.value());
						}
					}
					case 6 -> refused(cq + ".ackEvents(1) after close", run(() -> cq.q.ackEvents(1)), MISUSE);
					case 7 -> ok(cq + ".close() again", run(cq.q::close));
					case 8 -> refused(cq + ".startPoll() after close", attempt(cq.x::startPoll), ISE);
					case 9 -> refused(cq + ".nextPoll() after close", attempt(cq.x::nextPoll), ISE);
					default -> refused(cq + ".endPoll() after close", run(cq.x::endPoll), ISE);
				}
			}
			case Chan c -> {
				switch (v % 4) {
					case 0 -> refused(c + ".await after close", attempt(() -> c.ch.await(10 * MS, waker)), ISE);
					case 1 -> refused(c + ".getEvent() after close", attempt(c.ch::getEvent), ISE);
					case 2 ->
						refused(c + ".getEvent(10 ms) after close", attempt(() -> c.ch.getEvent(10 * MS, waker)), ISE);
					default -> ok(c + ".close() again", run(c.ch::close));
				}
			}
			case Buf b -> {
				// a poll into the closed buffer belongs to pollClosedBuffer(Extended):
				// only when that kind is included
				List<Cq> open = openCqs().stream()
					.filter(c -> cfg.included(c.ext() ? Kind.POLL_CLOSED_BUFFER_EXTENDED : Kind.POLL_CLOSED_BUFFER))
					.toList();
				if (v % 3 == 0 || open.isEmpty()) {
					refused(b + ".get(0) after close", attempt(() -> b.b.get(0)), ISE);
				}
				else if (v % 3 == 1) {
					ok(b + ".close() again", run(b.b::close));
				}
				else {
					Cq cq = any(open);
					refusedPoll(cq, b + " (closed)", attempt(() -> cq.q.poll(b.b)));
				}
			}
			case Qp qp -> {
				switch (v % 3) {
					case 0 -> refused(qp + ".postRecv after close", run(() -> qp.lb.postRecv(0, 0)), ISE);
					case 1 -> refused(qp + ".postSend after close", run(() -> qp.lb.postSend(0, 0, 8, null)), ISE);
					default -> ok(qp + ".close() again", run(qp.lb::close));
				}
			}
			default -> throw new IllegalStateException(String.valueOf(o));
		}
		trace("used closed " + o + " (variant " + v + ")");
	}

	// ------------------------------------------------------------------ traffic

	private void post() {
		Qp qp = any(liveQps());
		int v = rnd.nextInt(10);
		int pairs = 1 + rnd.nextInt(3);
		int posted = 0;
		for (int i = 0; i < pairs; i++) {
			if (v < 7) {
				posted += postPair(qp);
			}
			else {
				posted += post(qp, v == 7) ? 1 : 0;
			}
		}
		trace("posted " + posted + " on " + qp + (v < 7 ? " (pairs)" : v == 7 ? " (sends)" : " (receives)"));
	}

	private int postPair(Qp qp) {
		return (post(qp, false) ? 1 : 0) + (post(qp, true) ? 1 : 0);
	}

	/**
	 * Posts one signaled receive or send unless its queue already holds depth unpolled
	 * requests.
	 */
	private boolean post(Qp qp, boolean send) {
		AtomicInteger out = send ? qp.outSend : qp.outRecv;
		if (out.incrementAndGet() > qp.depth) {
			out.decrementAndGet();
			return false;
		}
		long id = nextWrId.getAndIncrement();
		Wr w = new Wr(id, qp, send, label);
		wrs.put(id, w);
		int slot = (int) (id % qp.depth);
		Result<Void> r = run(() -> {
			if (send) {
				qp.lb.postSend(id, slot, 8 + (int) (id % (SLOT - 7)), null);
			}
			else {
				qp.lb.postRecv(id, slot);
			}
		});
		if (r.error() != null) {
			wrs.remove(id);
			out.decrementAndGet();
			throw unexpected(qp + (send ? ".postSend" : ".postRecv") + "(wr_id " + id + ")", r.error());
		}
		stats.posted.increment();
		return true;
	}

	/**
	 * Puts a new completion on its way to {@code cq} (when an open QP feeds it): a full
	 * pair on such a QP, after polling the QP's other CQ when the QP had no room (its
	 * unpolled completions there count against its depth). Returns whether a full pair
	 * was posted.
	 */
	private boolean feed(Cq cq) {
		List<Qp> feeders = liveQps().stream().filter(q -> q.send == cq || q.recv == cq).toList();
		if (feeders.isEmpty()) {
			return false;
		}
		Qp qp = any(feeders);
		int posted = feedPair(qp, cq);
		trace("feeding " + cq + ": posted " + posted + " on " + qp);
		return posted == 2;
	}

	/**
	 * An open CQ of the given type that a live QP feeds (so that {@link #feed} can put a
	 * completion on it): one that has a feeder, else one given a new QP when there is
	 * room for one, else any.
	 */
	private Cq fed(Predicate<Cq> type) {
		List<Cq> candidates = openCqs().stream().filter(type).toList();
		List<Cq> feedable = candidates.stream()
			.filter(c -> liveQps().stream().anyMatch(q -> q.send == c || q.recv == c))
			.toList();
		if (!feedable.isEmpty()) {
			return any(feedable);
		}
		Cq cq = any(candidates);
		if (openQps().size() < 4) {
			Cq other = any(openCqs());
			if (chance(0.5)) {
				createQp(cq, other, 1 + rnd.nextInt(MAX_DEPTH));
			}
			else {
				createQp(other, cq, 1 + rnd.nextInt(MAX_DEPTH));
			}
		}
		return cq;
	}

	private static final Predicate<Cq> ANY = c -> true;

	private static final Predicate<Cq> LEGACY = c -> !c.ext();

	private static final Predicate<Cq> EXTENDED = Cq::ext;

	/**
	 * A receive and a send on {@code qp}: whatever was queued before, that gives at least
	 * one new completion on each of its CQs. When the QP is full, its CQs other than
	 * {@code keep} are polled first to make room. Returns the number posted (2 = the
	 * pair).
	 */
	private int feedPair(Qp qp, Cq keep) {
		for (int i = 0; i < 20 && (qp.outRecv.get() >= qp.depth || qp.outSend.get() >= qp.depth); i++) {
			boolean polled = false;
			for (Cq other : qp.send == qp.recv ? List.of(qp.send) : List.of(qp.send, qp.recv)) {
				if (other != keep) {
					polled |= pollOnce(other, temp(new WorkCompletionBuffer(8)), false,
							other + " (making room on " + qp + ")", false) > 0;
				}
			}
			if (!polled) {
				sleepMs(1);
			}
		}
		if (qp.outRecv.get() >= qp.depth || qp.outSend.get() >= qp.depth) {
			return 0; // the completions that fill it are on keep itself: one is on its
						// way already
		}
		return postPair(qp);
	}

	private void qpError(Qp qp) {
		qp.error = true; // before: a flushed completion may be polled by another thread
							// right away
		ok(qp + ".moveToError()", run(() -> qp.lb.qp().moveToError()));
		trace(qp + " moved to the error state (" + (qp.outSend.get() + qp.outRecv.get()) + " outstanding)");
	}

	// ------------------------------------------------------------------ the completion
	// model

	/**
	 * Checks one completion against the model: outstanding on this CQ, not seen before, a
	 * plausible status.
	 */
	void record(Cq cq, WorkCompletion wc, String via) {
		long id = wc.wrId();
		int status = wc.statusCode();
		int opcode = status == 0 ? wc.opcodeCode() : -1;
		record(cq, id, status, opcode, via);
	}

	private void record(Cq cq, long id, int status, int opcode, String via) {
		stats.completions.increment();
		Wr w = wrs.get(id);
		if (w == null) {
			throw failure("phantom completion on " + cq + " (via " + via + "): wr_id " + id + " was never posted"
					+ lastRaw(cq));
		}
		if (w.cq != cq) {
			throw failure("completion of " + w + " arrived on " + cq + " (via " + via + ")");
		}
		synchronized (w) {
			if (w.seenBy != null) {
				throw failure("completion of " + w + " delivered twice: first by " + w.seenBy + ", again by " + via
						+ " (a phantom or duplicate)" + lastRaw(cq));
			}
			w.seenBy = via;
		}
		(w.send ? w.qp.outSend : w.qp.outRecv).decrementAndGet();
		WcStatus s = WcStatus.of(status);
		if (s == WcStatus.SUCCESS) {
			WcOpcode expected = w.send ? WcOpcode.SEND : WcOpcode.RECV;
			if (WcOpcode.of(opcode) != expected) {
				throw failure("completion of " + w + " (via " + via + ") has opcode " + WcOpcode.of(opcode) + " ("
						+ opcode + "), expected " + expected);
			}
		}
		else if (s == WcStatus.WR_FLUSH_ERR) {
			if (!w.qp.error && !w.qp.closed) {
				throw failure("completion of " + w + " (via " + via + ") flushed although its QP is neither in "
						+ "the error state nor closed");
			}
		}
		else {
			throw failure("completion of " + w + " (via " + via + ") has status " + s + " (" + status + ")");
		}
	}

	private final Map<Cq, String> rawUse = new ConcurrentHashMap<>();

	private String lastRaw(Cq cq) {
		String r = rawUse.get(cq);
		return r == null ? "" : "; the raw iterator was last used on " + cq + " by " + r;
	}

	/**
	 * poll(buffer) or poll(buffer, handler) once; every completion recorded. Returns n,
	 * or -1 when refused.
	 */
	private int pollOnce(Cq cq, WorkCompletionBuffer b, boolean handler, String what, boolean mayRefuse) {
		String via = label + " " + what;
		if (handler) {
			AtomicInteger calls = new AtomicInteger();
			Result<Integer> r = attempt(() -> cq.q.poll(b, wc -> {
				calls.incrementAndGet();
				record(cq, wc, via);
			}));
			if (r.error() != null && mayRefuse && r.error() instanceof IllegalStateException) {
				stats.refusal(r.error());
				cq.refusedPolls.add(via + " (handler)");
				if (calls.get() > 0) {
					throw failure(via + ": poll(buffer, handler) was refused after handing out " + calls.get()
							+ " completion(s): " + r.error());
				}
				return -1;
			}
			int n = ok(via + ": " + cq + ".poll(buffer, handler)", r);
			if (n != calls.get()) {
				throw failure(via + ": " + cq + ".poll(buffer, handler) returned " + n + " but called the handler "
						+ calls.get() + " times");
			}
			return n;
		}
		Result<Integer> r = attempt(() -> cq.q.poll(b));
		if (r.error() != null && mayRefuse && r.error() instanceof IllegalStateException) {
			stats.refusal(r.error());
			cq.refusedPolls.add(via);
			return -1;
		}
		int n = ok(via + ": " + cq + ".poll(buffer)", r);
		if (n < 0 || n > b.capacity()) {
			throw failure(via + ": " + cq + ".poll(buffer of " + b.capacity() + ") returned " + n);
		}
		for (int i = 0; i < n; i++) {
			int index = i;
			Result<WorkCompletion> v = attempt(() -> b.get(index));
			WorkCompletion wc = ok(via + ": buffer.get(" + i + ") after a poll of " + n, v);
			Result<Void> rec = run(() -> record(cq, wc, via));
			ok(via + ": reading completion " + i + " of " + n, rec);
		}
		return n;
	}

	/**
	 * A poll that the contract refuses with IllegalStateException before anything is
	 * taken off the CQ.
	 */
	private void refusedPoll(Cq cq, String what, Result<Integer> r) {
		cq.refusedPolls.add(label + " " + what);
		if (r.error() == null) {
			throw failure(label + ": " + cq + ".poll into " + what + " returned " + r.value()
					+ " instead of IllegalStateException (" + r.value() + " completion(s) taken off the CQ)");
		}
		refused(cq + ".poll into " + what, r, ISE);
	}

	// ------------------------------------------------------------------ polling actions

	private void poll(boolean handler) {
		Cq cq = any(openCqs());
		Buf b = any(openBufs());
		int rounds = 1 + rnd.nextInt(3);
		int total = 0;
		for (int i = 0; i < rounds; i++) {
			total += pollOnce(cq, b.b, handler, cq + " -> " + b, false);
		}
		trace(cq + (handler ? ".poll(" + b + ", handler)" : ".poll(" + b + ")") + " x" + rounds + ": " + total
				+ " completion(s)");
	}

	private void readClosedBuffer() {
		Cq cq = fed(ANY);
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		feed(cq);
		int n = 0;
		long deadline = System.nanoTime() + 2000 * MS;
		while (n == 0 && System.nanoTime() < deadline) {
			n = pollOnce(cq, b, false, cq + " -> temp buffer", false);
			if (n == 0) {
				sleepMs(1);
			}
		}
		WorkCompletion view = n > 0 ? b.get(0) : null;
		b.close();
		if (view == null) {
			trace("no completion arrived on " + cq + ": nothing to read after close");
			stats.note("readClosedBuffer: no completion");
			return;
		}
		refused("buffer.get(0) after close", attempt(() -> b.get(0)), ISE);
		refused("wrId() of a view of a closed buffer", attempt(view::wrId), ISE);
		refused("statusCode() of a view of a closed buffer", attempt(view::statusCode), ISE);
		trace("polled " + n + " from " + cq + ", closed the buffer: its views refuse");
	}

	private void staleView() {
		Cq cq = fed(ANY);
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(4));
		AtomicReference<WorkCompletion> saved = new AtomicReference<>();
		feed(cq);
		boolean got = pollWithHook(cq, b, cq + " (view kept)", () -> {
		}, saved::set);
		if (!got) {
			return;
		}
		Result<Long> r = attempt(() -> saved.get().wrId());
		if (r.error() != null) {
			refused("a view read after its poll returned", r, MISUSE);
		}
		trace("a view of " + cq + " read after its poll: "
				+ (r.error() == null ? "wr_id " + r.value() : r.error().getClass().getSimpleName()));
	}

	private void pollClosedBuffer(boolean ext) {
		Cq cq = fed(ext ? EXTENDED : LEGACY);
		feed(cq);
		sleepMs(20); // let the completion arrive: a binding that takes it before refusing
						// then loses it
		List<Buf> closed = bufs.stream().filter(x -> x.closed).toList();
		WorkCompletionBuffer b;
		String name;
		if (!closed.isEmpty() && chance(0.5)) {
			Buf x = any(closed);
			b = x.b;
			name = x + " (closed)";
		}
		else {
			b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(8)));
			b.close();
			name = "a closed temp buffer";
		}
		if (chance(0.5)) {
			refusedPoll(cq, name, attempt(() -> cq.q.poll(b)));
		}
		else {
			AtomicInteger calls = new AtomicInteger();
			Result<Integer> r = attempt(() -> cq.q.poll(b, wc -> {
				calls.incrementAndGet();
				record(cq, wc, label + " handler of a poll into a closed buffer");
			}));
			refusedPoll(cq, name + " with a handler", r);
		}
		trace(cq + ".poll into " + name + ": refused");
	}

	private void rawIterator() {
		Cq cq = fed(EXTENDED);
		if (chance(0.7)) {
			feed(cq);
			sleepMs(5);
		}
		int batches = 1 + rnd.nextInt(3);
		int[] nexts = new int[batches];
		for (int i = 0; i < batches; i++) {
			nexts[i] = rnd.nextInt(5);
		}
		int misuse = rnd.nextInt(4);
		rawUse.put(cq, label);
		int seen = 0;
		StringBuilder sb = new StringBuilder();
		for (int i = 0; i < batches; i++) {
			int got = rawBatch(cq, nexts[i], label + " raw batch " + i, null);
			seen += Math.max(0, got);
			sb.append(got < 0 ? " empty" : " " + got);
		}
		switch (misuse) {
			case 0 -> refused(cq + ".nextPoll() without a batch", attempt(cq.x::nextPoll), ISE);
			case 1 -> refused(cq + ".endPoll() without a batch", run(cq.x::endPoll), ISE);
			case 2 -> refused(cq + ".current() without a batch", attempt(cq.x::current), ISE);
			default -> {
			}
		}
		trace("raw iterator on " + cq + ", batches:" + sb + " (" + seen + " completions)");
	}

	/**
	 * startPoll, up to {@code nexts} nextPoll, endPoll; every completion recorded;
	 * {@code inside} runs between the first completion and endPoll. Returns the
	 * completions, or -1 when startPoll found the CQ empty.
	 */
	private int rawBatch(Cq cq, int nexts, String via, Runnable inside) {
		boolean started = ok(via + ": " + cq + ".startPoll()", attempt(cq.x::startPoll));
		if (!started) {
			return -1;
		}
		int n = 0;
		try {
			record(cq, cq.x.current(), via);
			n++;
			if (inside != null) {
				trace("inside a raw batch of " + cq);
				inside.run();
			}
			for (int i = 0; i < nexts; i++) {
				boolean more = ok(via + ": " + cq + ".nextPoll()", attempt(cq.x::nextPoll));
				if (!more) {
					break;
				}
				record(cq, cq.x.current(), via);
				n++;
			}
		}
		finally {
			Result<Void> end = run(cq.x::endPoll);
			if (end.error() != null) {
				throw unexpected(via + ": " + cq + ".endPoll()", end.error());
			}
		}
		return n;
	}

	/**
	 * Polls {@code cq} with a handler until it has run at least once (at most 3 s),
	 * running {@code hook} inside the first call; {@code view} gets every view. Returns
	 * whether the hook ran (at most 2 s).
	 */
	private boolean pollWithHook(Cq cq, WorkCompletionBuffer b, String what, Runnable hook,
			Consumer<WorkCompletion> view) {
		String via = label + " " + what;
		AtomicInteger ran = new AtomicInteger();
		long deadline = System.nanoTime() + 2000 * MS;
		while (ran.get() == 0 && System.nanoTime() < deadline) {
			AtomicInteger calls = new AtomicInteger();
			Result<Integer> r = attempt(() -> cq.q.poll(b, wc -> {
				calls.incrementAndGet();
				record(cq, wc, via);
				view.accept(wc);
				if (ran.getAndIncrement() == 0) {
					trace("inside the handler of " + cq + " (wr_id " + wc.wrId() + ")");
					hook.run();
				}
			}));
			int n = ok(via + ": " + cq + ".poll(buffer, handler)", r);
			if (n != calls.get()) {
				throw failure(via + ": " + cq + ".poll(buffer, handler) returned " + n + " but called the handler "
						+ calls.get() + " times");
			}
			if (ran.get() == 0) {
				sleepMs(1);
			}
		}
		if (ran.get() == 0) {
			trace("no completion arrived on " + cq + " within 2 s: nothing to run inside a handler");
			stats.note(kind.id() + ": no completion to nest in");
		}
		return ran.get() > 0;
	}

	private static final Consumer<WorkCompletion> NO_VIEW = wc -> {
	};

	private void nestedSameCq(boolean ext) {
		Cq cq = fed(ext ? EXTENDED : LEGACY);
		int v = rnd.nextInt(ext ? 4 : 3);
		int target = resizeTarget(cq);
		WorkCompletionBuffer outer = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		WorkCompletionBuffer inner = temp(new WorkCompletionBuffer(4));
		feed(cq);
		String[] what = { "poll(buffer)", "poll(buffer, handler)", "resize(" + target + ")", "startPoll()" };
		boolean ran = pollWithHook(cq, outer, cq + " (nesting " + what[v] + ")", () -> reenter(cq, v, inner, target),
				NO_VIEW);
		if (ran) {
			trace(cq + "." + what[v] + " from inside its own handler: refused");
		}
	}

	/**
	 * The same thread calls into {@code cq} again while it holds it: refused, nothing
	 * taken.
	 */
	private void reenter(Cq cq, int v, WorkCompletionBuffer inner, int target) {
		String what = label + ": " + cq + " re-entered by the thread that holds it";
		trace("re-entering " + cq + ": "
				+ new String[] { "poll(buffer)", "poll(buffer, handler)", "resize(" + target + ")", "startPoll()" }[v]);
		switch (v) {
			case 0 -> refusedPoll(cq, "another buffer (" + what + ")", attempt(() -> cq.q.poll(inner)));
			case 1 -> refusedPoll(cq, "another buffer with a handler (" + what + ")",
					attempt(() -> cq.q.poll(inner, wc -> record(cq, wc, what + " (nested handler)"))));
			case 2 -> {
				Result<Void> r = run(() -> cq.q.resize(target));
				if (r.error() == null) {
					throw failure(what + ": resize(" + target + ") was not refused");
				}
				refused(what + ": resize", r, ISE);
			}
			default -> {
				Result<Boolean> r = attempt(cq.x::startPoll);
				if (r.error() == null) {
					if (r.value()) {
						record(cq, cq.x.current(), what + " (nested startPoll)");
						cq.x.endPoll();
					}
					throw failure(what + ": startPoll() was not refused (returned " + r.value() + ")");
				}
				refused(what + ": startPoll()", r, ISE);
			}
		}
	}

	private void batchReentry() {
		Cq cq = fed(EXTENDED);
		int v = rnd.nextInt(5);
		int target = resizeTarget(cq);
		WorkCompletionBuffer inner = temp(new WorkCompletionBuffer(4));
		feed(cq);
		String via = label + " raw batch (re-entry " + v + ")";
		rawUse.put(cq, label);
		long deadline = System.nanoTime() + 2000 * MS;
		while (System.nanoTime() < deadline) {
			int n = rawBatch(cq, 0, via, () -> {
				if (v == 4) {
					trace("closing " + cq + " inside its raw batch");
					Result<Void> r = run(cq.q::close);
					if (r.error() == null) {
						cq.closed = true;
						throw failure(via + ": " + cq + ".close() between startPoll() and endPoll() closed the CQ");
					}
					refused(via + ": close() inside the batch", r, ISE);
				}
				else {
					reenter(cq, v, inner, target);
				}
			});
			if (n > 0) {
				trace("between " + cq + ".startPoll() and endPoll(): re-entry " + v + " refused");
				return;
			}
			sleepMs(1);
		}
		trace("no completion arrived on " + cq + " within 2 s: no batch to re-enter");
		stats.note("batchReentry: no completion");
	}

	private void nestedClose() {
		Cq cq = fed(ANY);
		boolean closeCq = chance(0.5);
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		feed(cq);
		boolean ran = pollWithHook(cq, b, cq + " (closing from inside)", () -> {
			String what = label + ": " + (closeCq ? cq + ".close()" : "close() of the buffer being polled into")
					+ " from inside the handler";
			Result<Void> r = run(closeCq ? cq.q::close : b::close);
			if (r.error() == null) {
				if (closeCq) {
					cq.closed = true;
				}
				throw failure(what + " was not refused");
			}
			refused(what, r, ISE);
		}, NO_VIEW);
		if (!ran) {
			return;
		}
		if (closeCq && cq.q.isClosed()) {
			throw failure(cq + " reports closed after a refused close from inside its handler");
		}
		// both stay usable
		pollOnce(cq, b, chance(0.5), cq + " after a refused close from its handler", false);
		trace((closeCq ? cq + ".close()" : "buffer.close()") + " from inside a handler of " + cq + ": refused");
	}

	private void nestedSameBuffer() {
		Cq cq = fed(ANY);
		Cq other = any(openCqs().stream().filter(c -> c != cq).toList());
		boolean handler = chance(0.5);
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		feed(cq);
		boolean ran = pollWithHook(cq, b, cq + " (nesting a poll of " + other + " into the same buffer)", () -> {
			String what = "the buffer in use by the enclosing poll of " + cq;
			if (handler) {
				refusedPoll(other, what + " (with a handler)", attempt(
						() -> other.q.poll(b, wc -> record(other, wc, label + " nested poll into the buffer in use"))));
			}
			else {
				refusedPoll(other, what, attempt(() -> other.q.poll(b)));
			}
		}, NO_VIEW);
		if (ran) {
			trace(other + ".poll into the buffer of the running poll of " + cq + ": refused");
		}
	}

	private void nestedOther() {
		Cq cq = fed(ANY);
		List<Cq> others = openCqs().stream().filter(c -> c != cq).toList();
		int v = rnd.nextInt(6);
		boolean handler = chance(0.5);
		Cq other = others.isEmpty() ? null : any(others);
		List<Qp> live = liveQps();
		Qp qp = live.isEmpty() ? null : any(live);
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		WorkCompletionBuffer inner = temp(new WorkCompletionBuffer(4));
		feed(cq);
		String[] what = new String[1];
		boolean ran = pollWithHook(cq, b, cq + " (nesting allowed calls)", () -> {
			if (v <= 1 && other != null) {
				int n = pollOnce(other, inner, handler, other + " from inside a handler of " + cq, false);
				what[0] = other + ".poll: " + n;
			}
			else if (v == 2 && qp != null) {
				what[0] = "posted " + postPair(qp) + " on " + qp;
			}
			else if (v == 3 && cq.chan != null) {
				ok(cq + ".requestNotify from its handler", run(() -> cq.q.requestNotify(chance(0.5))));
				what[0] = cq + ".requestNotify";
			}
			else if (v == 4) {
				int acked = ok(cq + ".ackEvents() from its handler", attempt(cq.q::ackEvents));
				what[0] = cq + ".ackEvents: " + acked;
			}
			else {
				int cqe = ok(cq + ".cqe() from its handler", attempt(cq.q::cqe));
				what[0] = cq + ".cqe: " + cqe;
			}
		}, NO_VIEW);
		if (ran) {
			trace("from inside a handler of " + cq + ": " + what[0]);
		}
	}

	// ------------------------------------------------------------------ other threads

	/** A platform thread whose failure is kept for {@link #joinAll}. */
	private Thread spawn(String name, Runnable body) {
		Thread t = new Thread(() -> {
			try {
				body.run();
			}
			catch (Throwable e) {
				threadFailures.add(e);
			}
		}, "api-seq-" + seed + "-" + name);
		t.setDaemon(true);
		return t;
	}

	/**
	 * Joins (the watchdog bounds the wait) and rethrows the first failure of a thread.
	 */
	private void joinAll(List<Thread> threads) {
		for (Thread t : threads) {
			try {
				t.join();
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				throw new SequenceFailure("interrupted", e);
			}
		}
		if (!threadFailures.isEmpty()) {
			Throwable first = threadFailures.getFirst();
			threadFailures.clear();
			throw first instanceof SequenceFailure f ? f : unexpected(label + " on another thread", first);
		}
	}

	private static void awaitLatch(CountDownLatch l) {
		try {
			l.await(5, TimeUnit.SECONDS);
		}
		catch (InterruptedException e) {
			Thread.currentThread().interrupt();
		}
	}

	private void waitForPoll(boolean ext) {
		Cq cq = fed(ext ? EXTENDED : LEGACY);
		int v = rnd.nextInt(ext ? 4 : 3); // other thread: 0 poll(buffer), 1
											// poll(handler), 2 resize, 3 raw batch
		boolean inRawBatch = ext && chance(0.4);
		int target = resizeTarget(cq);
		WorkCompletionBuffer outer = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		WorkCompletionBuffer tb = temp(new WorkCompletionBuffer(8));
		feed(cq);
		String[] what = { "poll(buffer)", "poll(buffer, handler)", "resize(" + target + ")", "a raw batch" };
		boolean safepoint = chance(0.5);
		CountDownLatch started = new CountDownLatch(1);
		AtomicLong otherEnd = new AtomicLong();
		AtomicLong holdEnd = new AtomicLong();
		String via = label + " other thread's " + what[v];
		Thread t = spawn("waiter", () -> {
			started.countDown();
			switch (v) {
				case 0, 1 -> pollOnce(cq, tb, v == 1, "(other thread) " + cq, false);
				case 2 -> ok(via, run(() -> cq.q.resize(target)));
				default -> rawBatch(cq, 2, via, null);
			}
			otherEnd.set(System.nanoTime());
		});
		Runnable hold = () -> {
			t.start();
			awaitLatch(started);
			sleepMs(50);
			if (safepoint) {
				// what any handler may cause (an allocation, a GC): a safepoint while the
				// other thread waits. A
				// thread that waits inside a critical downcall (spinning on the
				// provider's lock) never reaches it,
				// and the whole JVM stops
				trace("safepoint (System.gc()) while the other thread waits for " + cq);
				System.gc();
			}
			sleepMs(50);
			holdEnd.set(System.nanoTime());
		};
		boolean ran;
		if (inRawBatch) {
			rawUse.put(cq, label);
			ran = false;
			long deadline = System.nanoTime() + 2000 * MS;
			while (!ran && System.nanoTime() < deadline) {
				ran = rawBatch(cq, 0, label + " raw batch held", hold) > 0;
				if (!ran) {
					sleepMs(1);
				}
			}
		}
		else {
			ran = pollWithHook(cq, outer, cq + " (held while another thread calls in)", hold, NO_VIEW);
		}
		if (!ran) {
			if (inRawBatch) {
				stats.note(kind.id() + ": no completion to hold the CQ with");
			}
			return;
		}
		joinAll(List.of(t));
		if (otherEnd.get() - holdEnd.get() < 0) {
			throw failure(cq + "." + what[v] + " on another thread returned " + (holdEnd.get() - otherEnd.get()) / MS
					+ " ms before this thread left its " + (inRawBatch ? "raw batch" : "handler")
					+ " of the same CQ: it did not wait");
		}
		trace("another thread's " + cq + "." + what[v] + " waited for the " + (inRawBatch ? "raw batch" : "handler")
				+ " (returned " + (otherEnd.get() - holdEnd.get()) / MS + " ms after it)");
	}

	private void closeCqDuringPoll() {
		Cq cq = createCq(chance(0.5));
		Qp qp = createQp(cq, cq, 2);
		postPair(qp);
		postPair(qp);
		sleepMs(30);
		closeQp(qp); // its completions stay on the CQ (or legitimately vanish); nothing
						// uses the CQ now
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		CloseDuringPoll race = closeDuringPoll(cq, b, cq + ".close() on another thread during a poll", cq.q::close,
				cq + " (closed meanwhile by another thread)");
		if (!race.ran) {
			closeCq(cq);
			return;
		}
		joinAll(List.of(race.closer));
		markClosed(cq);
		if (race.waited() < 0) {
			throw failure(cq + ".close() on another thread returned " + -race.waited() / MS
					+ " ms before the handler of a poll of that CQ returned: it did not wait for the poll");
		}
		trace(cq + ".close() on another thread waited for the running poll (" + race.waited() / MS
				+ " ms after the handler)");
	}

	/**
	 * A close on another thread while a poll's handler runs: the closer starts from the
	 * handler, which then holds the poll 100 ms; {@link #waited()} is how long after the
	 * handler the close returned (negative: before it, the close did not wait).
	 */
	private static final class CloseDuringPoll {

		final AtomicLong closeEnd = new AtomicLong();

		final AtomicLong holdEnd = new AtomicLong();

		Thread closer;

		boolean ran;

		long waited() {
			return closeEnd.get() - holdEnd.get();
		}

	}

	/**
	 * Polls {@code cq} into {@code b} with a handler that starts a thread running
	 * {@code close} (logged as {@code what}) and holds the poll 100 ms; the closer is not
	 * joined.
	 */
	private CloseDuringPoll closeDuringPoll(Cq cq, WorkCompletionBuffer b, String what, VoidCall close, String polled) {
		CloseDuringPoll race = new CloseDuringPoll();
		CountDownLatch started = new CountDownLatch(1);
		race.closer = spawn("closer", () -> {
			started.countDown();
			ok(label + " " + what, run(close));
			race.closeEnd.set(System.nanoTime());
		});
		race.ran = pollWithHook(cq, b, polled, () -> {
			race.closer.start();
			awaitLatch(started);
			sleepMs(100);
			race.holdEnd.set(System.nanoTime());
		}, NO_VIEW);
		return race;
	}

	private void closeBufferDuringPoll() {
		Cq cq = fed(ANY);
		List<Buf> open = openBufs();
		Buf model = !open.isEmpty() && chance(0.5) ? any(open) : null;
		WorkCompletionBuffer b = model != null ? model.b : temp(new WorkCompletionBuffer(1 + rnd.nextInt(4)));
		feed(cq);
		CloseDuringPoll race = closeDuringPoll(cq, b, "buffer.close() on another thread during a poll into it",
				b::close, cq + " (its buffer closed meanwhile by another thread)");
		if (!race.ran) {
			b.close();
		}
		else {
			joinAll(List.of(race.closer));
		}
		if (model != null) {
			model.closed = true;
		}
		if (!race.ran) {
			return;
		}
		if (race.waited() < 0) {
			throw failure("buffer.close() on another thread returned " + -race.waited() / MS
					+ " ms before the handler of a poll of " + cq + " into that buffer returned: it did not wait");
		}
		refused("buffer.get(0) after it was closed", attempt(() -> b.get(0)), ISE);
		trace("buffer.close() on another thread waited for the poll of " + cq + " (" + race.waited() / MS
				+ " ms after the handler)");
	}

	private void concurrentPoll(boolean ext) {
		Cq cq = fed(ext ? EXTENDED : LEGACY);
		int threads = 2 + rnd.nextInt(3);
		List<Thread> ts = new ArrayList<>();
		AtomicInteger total = new AtomicInteger();
		for (int i = 0; i < threads; i++) {
			int rounds = 5 + rnd.nextInt(15);
			boolean[] handler = new boolean[rounds];
			for (int r = 0; r < rounds; r++) {
				handler[r] = chance(0.5);
			}
			WorkCompletionBuffer b = temp(new WorkCompletionBuffer(1 + rnd.nextInt(8)));
			String name = "poller" + i;
			int gcRound = chance(0.3) ? rnd.nextInt(rounds) : -1;
			ts.add(spawn(name, () -> {
				for (int r = 0; r < rounds; r++) {
					if (r == gcRound) {
						// a safepoint from inside a handler while other threads poll the
						// same CQ (see waitForPoll)
						total.addAndGet(Math.max(0, pollWithSafepoint(cq, b, cq + " [" + name + "]")));
					}
					else {
						total.addAndGet(pollOnce(cq, b, handler[r], cq + " [" + name + "]", false));
					}
				}
			}));
		}
		List<Qp> feeders = liveQps().stream().filter(q -> q.send == cq || q.recv == cq).toList();
		int pairs = feeders.isEmpty() ? 0 : 1 + rnd.nextInt(4);
		Qp qp = feeders.isEmpty() ? null : any(feeders);
		ts.forEach(Thread::start);
		for (int i = 0; i < pairs; i++) {
			postPair(qp);
			sleepMs(1);
		}
		joinAll(ts);
		trace(threads + " threads polled " + cq + " at once: " + total.get() + " completion(s)");
	}

	/**
	 * poll(buffer, handler) whose handler triggers a safepoint (System.gc()) at its first
	 * completion.
	 */
	private int pollWithSafepoint(Cq cq, WorkCompletionBuffer b, String what) {
		String via = label + " " + what;
		AtomicInteger calls = new AtomicInteger();
		int n = ok(via + ": " + cq + ".poll(buffer, handler)", attempt(() -> cq.q.poll(b, wc -> {
			record(cq, wc, via);
			if (calls.getAndIncrement() == 0) {
				System.gc();
			}
		})));
		if (n != calls.get()) {
			throw failure(via + ": " + cq + ".poll(buffer, handler) returned " + n + " but called the handler "
					+ calls.get() + " times");
		}
		return n;
	}

	/** A step of a thread of a parallel block. */
	private record ThreadStep(String what, Runnable body) {
	}

	private void parallel() {
		boolean extAllowed = cfg.included(Kind.CONCURRENT_EXTENDED);
		List<Cq> targets = openCqs().stream().filter(c -> extAllowed || !c.ext()).toList();
		if (targets.isEmpty()) {
			trace("no CQ that several threads may poll at once (extended CQs excluded)");
			return;
		}
		int threads = 2 + rnd.nextInt(3);
		// one thread may close something that the others use: a CQ no QP uses, a shared
		// buffer or a channel
		int closer = chance(0.35) ? rnd.nextInt(threads) : -1;
		List<Cq> closable = targets.stream().filter(c -> usersOf(c).isEmpty()).toList();
		List<Buf> shared = openBufs();
		List<Chan> channels = openChans();
		// what the closer may close belongs to the kind that closes it while in use
		// (excluded: not closed here)
		List<Cq> closableCqs = cfg.included(Kind.CLOSE_CQ_DURING_POLL) ? closable : List.of();
		List<Buf> closableBufs = cfg.included(Kind.CLOSE_BUFFER_DURING_POLL) ? shared : List.of();
		List<Chan> closableChans = cfg.included(Kind.CLOSE_CHANNEL_DURING_WAIT) ? channels : List.of();
		Object victim = null;
		if (closer >= 0) {
			int v = rnd.nextInt(3);
			if (v == 0 && !closableCqs.isEmpty()) {
				victim = any(closableCqs);
			}
			else if (v == 1 && !closableBufs.isEmpty()) {
				victim = any(closableBufs);
			}
			else if (!closableChans.isEmpty()) {
				victim = any(closableChans);
			}
			else if (!closableCqs.isEmpty()) {
				victim = any(closableCqs);
			}
		}
		Object doomed = victim;
		List<List<ThreadStep>> plans = new ArrayList<>();
		for (int i = 0; i < threads; i++) {
			plans.add(planThread("t" + i, targets, shared, channels, doomed));
		}
		AtomicReference<String> closeOutcome = new AtomicReference<>("");
		if (doomed != null) {
			List<ThreadStep> plan = plans.get(closer);
			plan.add(rnd.nextInt(plan.size() + 1),
					new ThreadStep("close " + doomed, () -> closeOutcome.set(closeVictim(doomed))));
		}
		StringBuilder sb = new StringBuilder();
		for (int i = 0; i < threads; i++) {
			sb.append(i == 0 ? "" : " | ")
				.append("t")
				.append(i)
				.append(": ")
				.append(plans.get(i).stream().map(ThreadStep::what).collect(Collectors.joining(", ")));
		}
		trace(threads + " threads: " + sb);
		List<Thread> ts = new ArrayList<>();
		for (int i = 0; i < threads; i++) {
			List<ThreadStep> plan = plans.get(i);
			ts.add(spawn("t" + i, () -> {
				for (ThreadStep s : plan) {
					stats.threadSteps.increment();
					s.body().run();
				}
			}));
		}
		ts.forEach(Thread::start);
		joinAll(ts);
		if (doomed != null) {
			trace("close of " + doomed + ": " + closeOutcome.get());
		}
	}

	private String closeVictim(Object victim) {
		switch (victim) {
			case Cq cq -> {
				ok(label + " " + cq + ".close() while other threads use it", run(cq.q::close));
				markClosed(cq);
				return "closed";
			}
			case Buf b -> {
				ok(label + " " + b + ".close() while other threads poll into it", run(b.b::close));
				b.closed = true;
				return "closed";
			}
			case Chan c -> {
				List<Cq> on = cqsOn(c);
				Result<Void> r = run(c.ch::close);
				if (!on.isEmpty()) {
					refusedBusy(c + ".close() with " + on + " on it", r);
					return "refused (EBUSY)";
				}
				ok(c + ".close() while other threads wait on it", r);
				c.closed = true;
				return "closed";
			}
			default -> throw new IllegalStateException(String.valueOf(victim));
		}
	}

	private List<ThreadStep> planThread(String name, List<Cq> targets, List<Buf> shared, List<Chan> channels,
			Object doomed) {
		WorkCompletionBuffer own = temp(new WorkCompletionBuffer(1 + rnd.nextInt(8)));
		Waker w = temp(new Waker());
		List<ThreadStep> plan = new ArrayList<>();
		int steps = 2 + rnd.nextInt(6);
		List<Qp> live = liveQps();
		boolean rawAllowed = cfg.included(Kind.RAW_ITERATOR) && cfg.included(Kind.CONCURRENT_EXTENDED);
		for (int i = 0; i < steps; i++) {
			int v = rnd.nextInt(10);
			Cq cq = any(targets);
			boolean cqMayClose = cq == doomed;
			String via = label + " [" + name + "]";
			switch (v) {
				case 0, 1, 2 -> plan.add(new ThreadStep("poll " + cq,
						() -> pollOnce(cq, own, false, cq + " [" + name + "]", cqMayClose)));
				case 3 -> {
					Buf sb = !shared.isEmpty() && chance(0.5) ? any(shared) : null;
					WorkCompletionBuffer b = sb != null ? sb.b : own;
					plan.add(new ThreadStep("pollHandler " + cq + (sb != null ? " -> shared " + sb : ""),
							() -> pollOnce(cq, b, true, cq + " [" + name + "]", cqMayClose || sb != null)));
				}
				case 4 -> {
					if (live.isEmpty()) {
						continue;
					}
					Qp qp = any(live);
					plan.add(new ThreadStep("post " + qp, () -> postPair(qp)));
				}
				case 5 -> {
					int target = resizeTarget(cq);
					plan.add(new ThreadStep("resize " + cq + " " + target, () -> {
						Result<Void> r = run(() -> cq.q.resize(target));
						if (!cqMayClose || r.error() == null) {
							ok(via + " " + cq + ".resize(" + target + ")", r);
						}
						else {
							refused(via + " resize of a CQ being closed", r, ISE);
						}
					}));
				}
				case 6 -> {
					if (cq.chan == null) {
						plan.add(new ThreadStep("ack " + cq, () -> okOrRefused(via + " " + cq + ".ackEvents()",
								attempt(cq.q::ackEvents), cqMayClose ? ISE : new Class<?>[0])));
					}
					else {
						boolean solicited = chance(0.3);
						plan.add(new ThreadStep("notify " + cq, () -> okOrRefused(via + " " + cq + ".requestNotify",
								run(() -> cq.q.requestNotify(solicited)), cqMayClose ? ISE : new Class<?>[0])));
					}
				}
				case 7, 8 -> {
					if (channels.isEmpty()) {
						continue;
					}
					Chan c = any(channels);
					long t = new long[] { 0, 5, 20 }[rnd.nextInt(3)];
					boolean await = v == 7;
					plan.add(new ThreadStep((await ? "await " : "getEvent ") + c + " " + t + "ms",
							() -> waitOn(c, await, t, w, c == doomed, via)));
				}
				default -> {
					List<Cq> exts = targets.stream().filter(Cq::ext).toList();
					if (!rawAllowed || exts.isEmpty()) {
						continue;
					}
					Cq x = any(exts);
					int nexts = rnd.nextInt(3);
					plan.add(new ThreadStep("raw " + x, () -> {
						rawUse.put(x, via);
						if (x == doomed) {
							Result<Boolean> r = attempt(x.x::startPoll);
							if (r.error() != null) {
								refused(via + " startPoll of a CQ being closed", r, ISE);
								return;
							}
							if (r.value()) {
								try {
									record(x, x.x.current(), via + " raw");
								}
								finally {
									x.x.endPoll();
								}
							}
						}
						else {
							rawBatch(x, nexts, via + " raw", null);
						}
					}));
				}
			}
		}
		return plan;
	}

	/**
	 * await or getEvent with a timeout on a thread's own waker (never signalled): an
	 * event of this channel's CQs, READY, or (after the timeout) TIMEOUT/null; WOKEN or a
	 * refusal only when the channel may be closing.
	 */
	private void waitOn(Chan c, boolean await, long timeoutMs, Waker w, boolean mayClose, String via) {
		if (await) {
			Result<CompletionChannel.WaitResult> r = attempt(() -> c.ch.await(timeoutMs * MS, w));
			if (r.error() != null && mayClose) {
				refused(via + " " + c + ".await of a channel being closed", r, ISE);
				return;
			}
			CompletionChannel.WaitResult res = ok(via + " " + c + ".await(" + timeoutMs + " ms)", r);
			if (res == WOKEN && !mayClose) {
				throw failure(via + " " + c + ".await(" + timeoutMs + " ms, unsignalled waker) returned WOKEN");
			}
			checkWaitTime(via + " " + c + ".await", timeoutMs, r.nanos(), res == TIMEOUT && !mayClose);
			return;
		}
		Result<CompletionQueue> r = attempt(() -> c.ch.getEvent(timeoutMs * MS, w));
		if (r.error() != null && mayClose) {
			refused(via + " " + c + ".getEvent of a channel being closed", r, ISE);
			return;
		}
		if (r.error() instanceof IllegalStateException e && c.ch.waitMode() == CompletionChannel.WaitMode.BLOCKING_READ
				&& String.valueOf(e.getMessage()).contains("one thread getting events at a time")) {
			// the documented refusal of a second thread getting events at once
			trace(via + " " + c + ".getEvent refused: another thread gets events");
			return;
		}
		CompletionQueue q = ok(via + " " + c + ".getEvent(" + timeoutMs + " ms)", r);
		checkWaitTime(via + " " + c + ".getEvent", timeoutMs, r.nanos(), q == null && !mayClose);
		if (q != null) {
			gotEvent(c, q, via);
		}
	}

	/**
	 * A wait that ended without an event must have lasted about its timeout; none lasts
	 * far longer than it.
	 */
	private void checkWaitTime(String what, long timeoutMs, long nanos, boolean mustHaveWaited) {
		if (nanos / MS > timeoutMs + SLACK_MS) {
			throw failure(what + " with a timeout of " + timeoutMs + " ms took " + nanos / MS + " ms");
		}
		if (mustHaveWaited && timeoutMs >= 20 && nanos < timeoutMs * MS / 2) {
			throw failure(what + " with a timeout of " + timeoutMs + " ms and an unsignalled waker returned without "
					+ "an event after " + nanos / 1000 + " us: it did not wait");
		}
	}

	private void gotEvent(Chan c, CompletionQueue q, String via) {
		Cq cq = byQueue.get(q);
		if (cq == null || cq.chan != c) {
			throw failure(via + ": " + c + " returned an event of " + (cq == null ? q : cq) + ", not one of its CQs "
					+ cqsOn(c));
		}
		long model = cq.got.incrementAndGet();
		if (q.eventsGot() < model) {
			throw failure(via + ": " + cq + ".eventsGot() is " + q.eventsGot() + " after " + model + " events got");
		}
	}

	// ------------------------------------------------------------------ resize and
	// events

	/**
	 * A size that holds every completion the CQ may still get (so no overrun), a little
	 * more at random.
	 */
	private int resizeTarget(Cq cq) {
		return Math.min(maxCqe, Math.max(1, committed(cq)) + rnd.nextInt(64));
	}

	private void resize() {
		Cq cq = any(openCqs());
		if (chance(0.25)) {
			int bad = new int[] { 0, -1, maxCqe + 1 }[rnd.nextInt(3)];
			refused(cq + ".resize(" + bad + ")", run(() -> cq.q.resize(bad)), MISUSE);
			pollOnce(cq, temp(new WorkCompletionBuffer(4)), false, cq + " after a refused resize", false);
			trace(cq + ".resize(" + bad + ") refused, still usable");
			return;
		}
		int target = resizeTarget(cq);
		ok(cq + ".resize(" + target + ")", run(() -> cq.q.resize(target)));
		int cqe = cq.q.cqe();
		if (cqe < target) {
			throw failure(cq + ".resize(" + target + ") left cqe() at " + cqe);
		}
		trace(cq + ".resize(" + target + "): cqe " + cqe);
	}

	private void requestNotify() {
		Cq cq = any(openCqs());
		boolean solicited = chance(0.3);
		Result<Void> r = run(() -> cq.q.requestNotify(solicited));
		if (cq.chan == null) {
			refused(cq + ".requestNotify without a channel", r, MISUSE);
			trace(cq + ".requestNotify refused: no channel");
		}
		else {
			ok(cq + ".requestNotify(" + solicited + ")", r);
			trace(cq + " armed" + (solicited ? " (solicited only)" : ""));
		}
	}

	private void getEvent() {
		Chan c = any(openChans());
		int v = rnd.nextInt(4);
		long t = new long[] { 0, 0, 10, 40 }[v];
		Result<CompletionQueue> r = attempt(() -> v == 0 ? c.ch.getEvent() : c.ch.getEvent(t * MS, waker));
		CompletionQueue q = ok(c + ".getEvent(" + (v == 0 ? "" : t + " ms") + ")", r);
		checkWaitTime(label + " " + c + ".getEvent", t, r.nanos(), q == null);
		if (q != null) {
			gotEvent(c, q, label);
		}
		trace(c + ".getEvent: " + (q == null ? "none" : byQueue.get(q)));
	}

	private void await() {
		Chan c = any(openChans());
		long t = new long[] { 0, 10, 40 }[rnd.nextInt(3)];
		if (chance(0.3)) {
			Waker w = temp(new Waker());
			w.wake();
			CompletionChannel.WaitResult res = ok(c + ".await with a signalled waker",
					attempt(() -> c.ch.await(5000 * MS, w)));
			if (res == TIMEOUT) {
				throw failure(c + ".await(5 s) with a signalled waker timed out");
			}
			trace(c + ".await(signalled waker): " + res);
			return;
		}
		boolean noWaker = chance(0.3);
		Result<CompletionChannel.WaitResult> r = attempt(() -> c.ch.await(t * MS, noWaker ? null : waker));
		CompletionChannel.WaitResult res = ok(c + ".await(" + t + " ms)", r);
		if (res == WOKEN) {
			throw failure(
					c + ".await(" + t + " ms, " + (noWaker ? "no waker" : "unsignalled waker") + ") returned WOKEN");
		}
		checkWaitTime(label + " " + c + ".await", t, r.nanos(), res == TIMEOUT);
		trace(c + ".await(" + t + " ms): " + res);
	}

	private void ackEvents() {
		Cq cq = any(openCqs().stream().filter(c -> c.chan != null).toList());
		long unacked = cq.q.eventsUnacked();
		if (chance(0.6) || unacked == 0) {
			int n = ok(cq + ".ackEvents()", attempt(cq.q::ackEvents));
			if (n != unacked) {
				throw failure(cq + ".ackEvents() acked " + n + " of " + unacked + " unacked events");
			}
			trace(cq + ".ackEvents(): " + n);
		}
		else {
			int n = 1 + rnd.nextInt((int) unacked);
			ok(cq + ".ackEvents(" + n + ")", run(() -> cq.q.ackEvents(n)));
			trace(cq + ".ackEvents(" + n + ") of " + unacked);
		}
		if (cq.q.eventsAcked() > cq.q.eventsGot()) {
			throw failure(cq + ": eventsAcked " + cq.q.eventsAcked() + " > eventsGot " + cq.q.eventsGot());
		}
	}

	private void wake() {
		Chan c = any(openChans());
		Waker w = temp(new Waker());
		boolean await = chance(0.5);
		AtomicReference<Object> result = new AtomicReference<>();
		AtomicLong took = new AtomicLong();
		CountDownLatch started = new CountDownLatch(1);
		Thread t = spawn("sleeper", () -> {
			started.countDown();
			long t0 = System.nanoTime();
			Object res = await ? ok(c + ".await(10 s, waker)", attempt(() -> c.ch.await(10_000 * MS, w)))
					: ok(c + ".getEvent(10 s, waker)", attempt(() -> c.ch.getEvent(10_000 * MS, w)));
			took.set(System.nanoTime() - t0);
			result.set(res);
		});
		t.start();
		awaitLatch(started);
		sleepMs(50);
		w.wake();
		joinAll(List.of(t));
		Object res = result.get();
		if (res instanceof CompletionQueue q) {
			gotEvent(c, q, label);
		}
		else if (res == TIMEOUT) {
			throw failure(c + ".await(10 s) timed out although its waker was signalled after 50 ms");
		}
		if (took.get() > 8000 * MS) {
			throw failure(c + (await ? ".await" : ".getEvent") + "(10 s) returned " + took.get() / MS
					+ " ms after its waker was signalled 50 ms in");
		}
		trace(c + (await ? ".await" : ".getEvent") + " woken after " + took.get() / MS + " ms: "
				+ (res instanceof CompletionQueue q ? byQueue.get(q) : res));
	}

	private void channelRefusedClose() {
		Cq some = any(openCqs().stream().filter(c -> c.chan != null).toList());
		Chan c = some.chan;
		List<Cq> on = cqsOn(c);
		refusedBusy(c + ".close() with " + on + " on it", run(c.ch::close));
		if (c.ch.isClosed()) {
			throw failure(c + " reports closed after its close() was refused");
		}
		// await and getEvent behave as before: no WOKEN without a wake-up, TIMEOUT/null
		// only after the timeout
		Result<CompletionChannel.WaitResult> a = attempt(() -> c.ch.await(40 * MS, waker));
		CompletionChannel.WaitResult res = ok(c + ".await(40 ms) after a refused close", a);
		if (res == WOKEN) {
			throw failure(c + ".await(40 ms, unsignalled waker) returned WOKEN after a refused close()");
		}
		checkWaitTime(c + ".await after a refused close", 40, a.nanos(), res == TIMEOUT);
		Result<CompletionQueue> g = attempt(() -> c.ch.getEvent(40 * MS, waker));
		CompletionQueue q = ok(c + ".getEvent(40 ms) after a refused close", g);
		checkWaitTime(c + ".getEvent after a refused close", 40, g.nanos(), q == null);
		if (q != null) {
			gotEvent(c, q, label);
		}
		// and an event still arrives
		List<Qp> feeders = liveQps().stream().filter(p -> p.send.chan == c || p.recv.chan == c).toList();
		if (feeders.isEmpty()) {
			trace(c + ".close() refused (EBUSY); await " + res + ", getEvent " + (q == null ? "none" : "an event")
					+ "; no QP feeds its CQs, no event to wait for");
			return;
		}
		for (Cq cq : on) {
			ok(cq + ".requestNotify after a refused close of its channel", run(() -> cq.q.requestNotify(false)));
		}
		Qp qp = any(feeders);
		int posted = feedPair(qp, null);
		if (posted < 2) {
			trace(c + ".close() refused (EBUSY); " + qp + " has no room for a pair (posted " + posted
					+ "), no event to wait for");
			stats.note("channelRefusedClose: no room for a pair");
			return;
		}
		long deadline = System.nanoTime() + 10_000 * MS;
		CompletionQueue fired = null;
		while (fired == null && System.nanoTime() < deadline) {
			fired = ok(c + ".getEvent(1 s) after a refused close", attempt(() -> c.ch.getEvent(1000 * MS, waker)));
		}
		if (fired == null) {
			throw failure("no event arrived on " + c + " within 10 s of arming " + on + " and posting on " + qp
					+ " after a refused close() of the channel");
		}
		gotEvent(c, fired, label);
		trace(c + ".close() refused (EBUSY); await " + res + "; an event of " + byQueue.get(fired) + " still arrived");
	}

	private void closeChannelDuringWait() {
		Chan c = any(openChans());
		List<Cq> on = cqsOn(c);
		Waker w = temp(new Waker());
		boolean await = chance(0.5);
		AtomicReference<Result<?>> result = new AtomicReference<>();
		CountDownLatch started = new CountDownLatch(1);
		Thread t = spawn("waiter", () -> {
			started.countDown();
			result.set(await ? attempt(() -> c.ch.await(1000 * MS, w)) : attempt(() -> c.ch.getEvent(1000 * MS, w)));
		});
		t.start();
		awaitLatch(started);
		sleepMs(50);
		Result<Void> r = run(c.ch::close);
		joinAll(List.of(t));
		Result<?> waited = result.get();
		if (waited.error() != null) {
			refused(c + (await ? ".await" : ".getEvent") + " while the channel was being closed", waited, ISE);
		}
		else if (waited.value() instanceof CompletionQueue q) {
			gotEvent(c, q, label);
		}
		if (waited.millis() > 1000 + SLACK_MS) {
			throw failure(c + (await ? ".await" : ".getEvent") + "(1 s) took " + waited.millis() + " ms");
		}
		if (!on.isEmpty()) {
			refusedBusy(c + ".close() with " + on + " on it, while another thread waits", r);
			Result<CompletionChannel.WaitResult> after = attempt(() -> c.ch.await(30 * MS, waker));
			CompletionChannel.WaitResult res = ok(c + ".await(30 ms) after a refused close", after);
			if (res == WOKEN) {
				throw failure(c + ".await(30 ms, unsignalled waker) returned WOKEN after a refused close()");
			}
			checkWaitTime(c + ".await after a refused close", 30, after.nanos(), res == TIMEOUT);
			trace(c + ".close() refused during a wait (waiter: " + describe(waited) + "); then await " + res);
			return;
		}
		ok(c + ".close() while another thread waits", r);
		c.closed = true;
		trace(c + " closed during a wait (waiter: " + describe(waited) + ")");
	}

	private static String describe(Result<?> r) {
		return (r.error() != null ? r.error().getClass().getSimpleName() : String.valueOf(r.value())) + " after "
				+ r.millis() + " ms";
	}

	// ------------------------------------------------------------------ invariants,
	// drain, teardown

	private void checkInvariants() {
		for (Cq cq : cqs) {
			if (cq.closed != cq.q.isClosed()) {
				throw failure(cq + ": isClosed() is " + cq.q.isClosed() + ", the model says " + cq.closed);
			}
			long got = cq.q.eventsGot();
			long acked = cq.q.eventsAcked();
			if (got != cq.got.get()) {
				throw failure(cq + ".eventsGot() is " + got + " but getEvent returned it " + cq.got.get() + " times");
			}
			if (acked > got) {
				throw failure(cq + ": eventsAcked " + acked + " > eventsGot " + got);
			}
			if (cq.closed && acked != got) {
				throw failure(cq + " is closed with " + (got - acked) + " events unacked");
			}
		}
		for (Chan c : chans) {
			if (c.closed != c.ch.isClosed()) {
				throw failure(c + ": isClosed() is " + c.ch.isClosed() + ", the model says " + c.closed);
			}
		}
		for (Qp qp : qps) {
			if (qp.outSend.get() < 0 || qp.outRecv.get() < 0) {
				throw failure(qp + ": more completions than work requests posted");
			}
		}
		// nothing native leaks, not even from a refused call: exactly the model's objects
		// are open
		long expected = baseline + (ctx.isClosed() ? 0 : 1) + openChans().size() + openCqs().size()
				+ 3L * openQps().size();
		long open = NativeObjects.open();
		if (open != expected) {
			throw failure("NativeObjects.open() is " + open + ", the model has " + expected + " (baseline " + baseline
					+ " + context, " + openChans().size() + " channel(s), " + openCqs().size() + " CQ(s), "
					+ openQps().size() + " QP(s) x PD+MR+QP): open by type " + NativeObjects.openByType());
		}
	}

	/**
	 * Every QP to the error state, then poll until every work request whose QP and CQ are
	 * open has completed.
	 */
	private void finalDrain() {
		step++;
		label = "#" + step + " final drain";
		progress.begin(label, 60_000);
		for (Qp qp : openQps()) {
			if (!qp.error) {
				qpError(qp);
			}
		}
		WorkCompletionBuffer b = temp(new WorkCompletionBuffer(16));
		boolean handler = chance(0.5);
		long deadline = System.nanoTime() + 20_000 * MS;
		int drained = 0;
		while (true) {
			int found = 0;
			for (Cq cq : openCqs()) {
				found += pollOnce(cq, b, handler, cq + " (drain)", false);
			}
			drained += found;
			List<Wr> missing = wrs.values()
				.stream()
				.filter(w -> w.seenBy == null && !w.qp.closed && !w.cq.closed)
				.toList();
			if (missing.isEmpty()) {
				break;
			}
			if (System.nanoTime() > deadline) {
				Map<Cq, List<Wr>> byCq = missing.stream().collect(Collectors.groupingBy(w -> w.cq));
				StringBuilder sb = new StringBuilder();
				byCq.forEach((cq, l) -> sb.append("\n      ")
					.append(cq)
					.append(": ")
					.append(l.stream()
						.sorted((x, y) -> Long.compare(x.id, y.id))
						.map(Wr::toString)
						.collect(Collectors.joining(", ")))
					.append("\n        refused polls of ")
					.append(cq)
					.append(": ")
					.append(cq.refusedPolls)
					.append(lastRaw(cq)));
				throw failure("lost: " + missing.size() + " work request(s) never completed within 20 s of moving "
						+ "every QP to the error state, although their QP and CQ stayed open:" + sb);
			}
			if (found == 0) {
				sleepMs(2);
			}
		}
		sleepMs(20);
		int late = 0;
		for (Cq cq : openCqs()) {
			late += Math.max(0, pollOnce(cq, b, !handler, cq + " (after the drain)", false));
		}
		long exact = wrs.values().stream().filter(w -> !w.qp.closed).count();
		trace("drained " + drained + " (+" + late + " late, of QPs closed before); " + exact
				+ " work request(s) of open QPs each completed exactly once, " + wrs.size() + " posted in all");
		checkInvariants();
		progress.end();
	}

	/**
	 * Closes everything in an order the seed chooses (or the context at once), then
	 * checks nothing stayed open.
	 */
	private void teardown() {
		step++;
		label = "#" + step + " teardown";
		progress.begin(label, 30_000);
		int mode = rnd.nextInt(3);
		if (mode > 0) {
			List<Object> all = new ArrayList<>();
			all.addAll(openQps());
			all.addAll(openCqs());
			all.addAll(openChans());
			all.addAll(openBufs());
			Collections.shuffle(all, new java.util.Random(rnd.nextLong()));
			int n = mode == 1 ? all.size() : rnd.nextInt(all.size() + 1);
			for (Object o : all.subList(0, n)) {
				switch (o) {
					case Qp qp -> closeQp(qp);
					case Cq cq -> closeCq(cq);
					case Chan c -> closeChannel(c);
					case Buf b -> closeBuffer(b);
					default -> throw new IllegalStateException(String.valueOf(o));
				}
			}
		}
		ok("context.close()", run(ctx::close));
		ok("context.close() again", run(ctx::close));
		for (Qp qp : qps) {
			qp.closed = true;
		}
		for (Cq cq : cqs) {
			if (!cq.closed) {
				markClosed(cq);
			}
		}
		for (Chan c : chans) {
			if (!c.ch.isClosed()) {
				throw failure(c + " still open after its context was closed");
			}
			c.closed = true;
		}
		for (Buf b : bufs) {
			b.b.close();
			b.closed = true;
		}
		if (chance(0.5) && (!cqs.isEmpty() || !chans.isEmpty())) {
			useClosed();
		}
		checkInvariants();
		closeTemps();
		trace("closed " + (mode == 0 ? "the context at once"
				: mode == 1 ? "every object, then the context" : "some objects, then the context"));
		progress.end();
	}

	private void closeTemps() {
		List<AutoCloseable> copy;
		synchronized (temps) {
			copy = new ArrayList<>(temps);
			temps.clear();
		}
		for (AutoCloseable c : copy) {
			try {
				c.close();
			}
			catch (Exception e) {
				throw new SequenceFailure("closing " + c, e);
			}
		}
	}

	// ------------------------------------------------------------------ helpers

	private List<Cq> openCqs() {
		return cqs.stream().filter(c -> !c.closed).toList();
	}

	private List<Chan> openChans() {
		return chans.stream().filter(c -> !c.closed).toList();
	}

	private List<Buf> openBufs() {
		return bufs.stream().filter(b -> !b.closed).toList();
	}

	private List<Qp> openQps() {
		return qps.stream().filter(q -> !q.closed).toList();
	}

	/** Open QPs not in the error state: the ones that get posted to. */
	private List<Qp> liveQps() {
		return qps.stream().filter(q -> !q.closed && !q.error).toList();
	}

	private List<Qp> usersOf(Cq cq) {
		return openQps().stream().filter(q -> q.send == cq || q.recv == cq).toList();
	}

	private List<Cq> cqsOn(Chan c) {
		return openCqs().stream().filter(cq -> cq.chan == c).toList();
	}

	/**
	 * Completions {@code cq} may still get: the depth of every open QP on it, the
	 * unpolled work of closed ones.
	 */
	private int committed(Cq cq) {
		int c = 0;
		for (Qp qp : qps) {
			if (qp.send == cq) {
				c += qp.closed ? Math.max(0, qp.outSend.get()) : qp.depth;
			}
			if (qp.recv == cq) {
				c += qp.closed ? Math.max(0, qp.outRecv.get()) : qp.depth;
			}
		}
		return c;
	}

	private <T> T any(List<T> l) {
		return l.get(rnd.nextInt(l.size()));
	}

	private boolean chance(double p) {
		return rnd.nextDouble() < p;
	}

	private <T extends AutoCloseable> T temp(T t) {
		temps.add(t);
		return t;
	}

	private static void sleepMs(long ms) {
		try {
			Thread.sleep(ms);
		}
		catch (InterruptedException e) {
			Thread.currentThread().interrupt();
		}
	}

	static <T> Result<T> attempt(Call<T> c) {
		long t0 = System.nanoTime();
		try {
			T v = c.call();
			return new Result<>(v, null, System.nanoTime() - t0);
		}
		catch (Throwable t) {
			return new Result<>(null, t, System.nanoTime() - t0);
		}
	}

	static Result<Void> run(VoidCall c) {
		return attempt(() -> {
			c.call();
			return null;
		});
	}

	private SequenceFailure failure(String message) {
		return new SequenceFailure(message);
	}

	private SequenceFailure unexpected(String what, Throwable t) {
		if (t instanceof SequenceFailure f) {
			return f;
		}
		return new SequenceFailure(what + ": unexpected " + t, t);
	}

	private <T> T ok(String what, Result<T> r) {
		if (r.error() != null) {
			throw unexpected(what, r.error());
		}
		return r.value();
	}

	private static boolean isAny(Throwable t, Class<?>[] allowed) {
		for (Class<?> c : allowed) {
			if (c.isInstance(t)) {
				return true;
			}
		}
		return false;
	}

	private void refused(String what, Result<?> r, Class<?>... allowed) {
		if (r.error() == null) {
			throw failure(what + ": expected " + names(allowed) + " but it returned " + r.value());
		}
		if (!isAny(r.error(), allowed)) {
			throw unexpected(what + " (allowed: " + names(allowed) + ")", r.error());
		}
		stats.refusal(r.error());
	}

	/**
	 * True when it returned, false when refused with one of {@code allowed}; anything
	 * else fails.
	 */
	private boolean okOrRefused(String what, Result<?> r, Class<?>... allowed) {
		if (r.error() == null) {
			return true;
		}
		if (!isAny(r.error(), allowed)) {
			throw unexpected(what, r.error());
		}
		stats.refusal(r.error());
		return false;
	}

	/**
	 * A close that the contract refuses with VerbsException EBUSY, leaving the object
	 * open.
	 */
	private void refusedBusy(String what, Result<?> r) {
		if (r.error() == null) {
			throw failure(what + " succeeded; expected VerbsException EBUSY (the object must stay open)");
		}
		if (!(r.error() instanceof VerbsException v) || v.errno() != Errno.EBUSY) {
			throw unexpected(what + " (expected VerbsException EBUSY)", r.error());
		}
		stats.refusal(r.error());
	}

	private static String names(Class<?>[] allowed) {
		return java.util.Arrays.stream(allowed).map(Class::getSimpleName).collect(Collectors.joining(" or "));
	}

}
