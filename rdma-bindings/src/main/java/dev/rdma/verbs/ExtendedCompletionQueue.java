package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.CqCreateCall;
import dev.rdma.verbs.ffm.CqProviderCalls;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * An extended completion queue ({@code struct ibv_cq_ex *}) created by
 * {@code ibv_create_cq_ex}, the static inline verb of verbs.h, reached through
 * {@code verbs_context.create_cq_ex} (EOPNOTSUPP when the provider lacks it, as the C
 * inline does). Polled with the iterator {@code ibv_start_poll} / {@code ibv_next_poll} /
 * {@code ibv_end_poll}; fields are read with the {@code ibv_wc_read_*} function pointers
 * of the CQ.
 *
 * <p>
 * <b>Iterator rules</b> (enforced): no {@code end_poll} after a failed
 * {@code start_poll}; exactly one {@code end_poll} after a started batch, also when
 * {@code next_poll} fails or the callback throws; the provider's lock is held in between,
 * so nothing else may touch the CQ: a batch runs in the CQ's exclusive slot (see
 * {@link CompletionQueue#poll(WorkCompletionBuffer)}), another thread waits for it in
 * Java, and the same thread polling, resizing, closing or starting another batch of this
 * CQ before {@code end_poll} is refused with {@link IllegalStateException} before any
 * native call. So is closing a {@link QueuePair} that uses this CQ, on that thread before
 * {@code end_poll}: {@code ibv_destroy_qp} takes the CQ's lock (mlx5, efa); close it
 * after the poll returned or after {@link #endPoll()} (see {@link QueuePair}).
 *
 * <p>
 * <b>Soft-RoCE before rdma-core 59</b> has two bugs on the documented drain sequence
 * ({@code next_poll} until ENOENT, then {@code end_poll}): before 55 it corrupts its
 * consumer index and hands out phantom completions afterwards; before 59 its
 * {@code next_poll} unlocks the CQ's spinlock on ENOENT, which {@code end_poll} then
 * unlocks again (see {@link Rdma#softRoceDrainIsSafe()}: 59 is the exact cut-off). On rxe
 * with an rdma-core older than 59 (detected from libefa's symbols) this class therefore
 * never calls {@code next_poll}: a batch holds one completion
 * ({@link #usesBatchIterator()} is false, {@link #nextPoll()} returns false without a
 * native call), the one pattern that is correct on every provider and version, for the
 * raw iterator too.
 *
 * <p>
 * <b>Fields.</b> Only the fields whose {@link WcExFlag} was requested at creation can be
 * read; any other read throws {@link IllegalStateException} without calling the provider
 * (its reader pointer may be NULL).
 */
public class ExtendedCompletionQueue extends CompletionQueue {

	/** How the iterator is driven; see the class comment. */
	enum IteratorMode {

		AUTO, BATCH, ONE_PER_BATCH

	}

	private static final int ENOENT = Errno.ENOENT;

	private final long wcFlags;

	private final int createFlags;

	final boolean batchIterator;

	private final Arena arena = Arena.ofShared();

	private final long pollAttrAddress = arena.allocate(Layouts.IBV_POLL_CQ_ATTR).address();

	private final MemorySegment startPoll;

	private final MemorySegment nextPoll;

	private final MemorySegment endPoll;

	/** The provider's readers of the current completion. */
	private final CqExReaders readers;

	/** The lazy view handed to handlers: one per CQ, reused. */
	private final ExtendedCompletionView current;

	/**
	 * The thread between a successful {@link #startPoll()} and its {@link #endPoll()} (it
	 * holds the exclusive slot then), or null.
	 */
	private @Nullable Thread batchThread;

	/**
	 * The thread on which the iterator stands on a completion whose fields may be read
	 * (ibv_create_cq_ex(3): only after start_poll or next_poll succeeded, until the next
	 * next_poll or end_poll), or null. Checked before every read of the view, so that no
	 * reader is called, and no stale field shown, once the batch has no current
	 * completion.
	 */
	private @Nullable Thread currentOn;

	/**
	 * True while that batch was opened by {@link #startPoll()} (the raw iterator), not by
	 * a poll method.
	 */
	private boolean rawBatch;

	/**
	 * Wraps a CQ that a verb of this module created. Protected for the provider packages
	 * of this module ({@code dev.rdma.verbs.efa}), which create their CQs with their own
	 * verb: nothing outside the module can subclass (the calls table's type is in the
	 * non-exported {@code dev.rdma.verbs.ffm}; on the class path, where every package is
	 * readable, the constructor refuses a subclass outside the {@code dev.rdma.verbs}
	 * packages of this class loader).
	 * @param context the owner; null for a CQ over memory that is not a device's (the
	 * tests' and benchmarks' rings, built through {@code dev.rdma.verbs.seam})
	 * @param cq the {@code struct ibv_cq_ex}, its iterator pointers checked
	 * ({@link #createNative})
	 * @param batchIterator whether to drain with {@code next_poll} (see the class
	 * comment)
	 * @param calls the functions the CQ calls besides its iterator and readers
	 */
	// "exports": on purpose, only this module can name the calls type; "this-escape": the
	// view only stores the reference, read after construction
	@SuppressWarnings({ "exports", "this-escape" })
	protected ExtendedCompletionQueue(@Nullable Context context, MemorySegment cq, CqInitAttributes attributes,
			boolean batchIterator, CqProviderCalls calls) {
		super(context, context == null ? "no device" : context.deviceName(), cq, attributes.channel(),
				attributes.compVector(), calls);
		Class<?> type = getClass();
		if (type != ExtendedCompletionQueue.class
				&& (type.getClassLoader() != ExtendedCompletionQueue.class.getClassLoader()
						|| !type.getPackageName().startsWith("dev.rdma.verbs."))) {
			throw new IllegalStateException(
					type + ": only the provider packages of dev.rdma.verbs extend " + "ExtendedCompletionQueue");
		}
		this.wcFlags = attributes.wcFlagsMask();
		this.createFlags = (int) BitFlag.mask(attributes.flags());
		var l = Layouts.IBV_CQ_EX;
		this.startPoll = cq.get(ADDRESS, Layouts.off(l, "start_poll"));
		this.nextPoll = cq.get(ADDRESS, Layouts.off(l, "next_poll"));
		this.endPoll = cq.get(ADDRESS, Layouts.off(l, "end_poll"));
		this.readers = new CqExReaders(cq, wcFlags, Native.unscoped(arena.allocate(16, 8)));
		this.current = new ExtendedCompletionView(this, readers);
		this.batchIterator = batchIterator;
	}

	/** Whether to drain with next_poll (see the class comment). */
	static boolean batchIterator(Context context, IteratorMode mode) {
		return switch (mode) {
			case BATCH -> true;
			case ONE_PER_BATCH -> false;
			case AUTO -> !(context.queryDevice().isSoftRoce() && !Rdma.softRoceDrainIsSafe());
		};
	}

	static ExtendedCompletionQueue create(Context context, CqInitAttributes attributes) {
		return create(context, attributes, IteratorMode.AUTO);
	}

	static ExtendedCompletionQueue create(Context context, CqInitAttributes attributes, IteratorMode mode) {
		boolean batch = batchIterator(context, mode);
		return createHolding(context, attributes, () -> {
			MemorySegment created = createNative(context, attributes, "ibv_create_cq_ex", "",
					(arena, capture, ctx, attr) -> {
						// read while createHolding holds the context open
						MemorySegment fn = context.verbsOp(Layouts.VCTX_CREATE_CQ_EX);
						if (Native.isNull(fn)) {
							throw new VerbsException("ibv_create_cq_ex", Errno.EOPNOTSUPP,
									"the provider of " + context.deviceName() + " has no create_cq_ex");
						}
						return (MemorySegment) Ibverbs.FP_CREATE_CQ_EX.invokeExact(fn, capture, ctx, attr);
					});
			return adoptCreated(created,
					() -> new ExtendedCompletionQueue(context, created, attributes, batch, providerCalls(context)));
		});
	}

	/**
	 * Runs {@code create} - {@link #createNative} and the construction of the CQ object -
	 * with the context, and the channel and the parent domain of {@code attributes},
	 * checked and held open, for this class and the provider packages of this module.
	 * Checks first, before any native call: the channel and the parent domain are open
	 * and belong to {@code context}. Then holds all three open until {@code create}
	 * returns, so that a {@code close()} of any on another thread never frees it while
	 * the create verb uses it or the new CQ is wrapped: that close is refused before
	 * (this throws "closed") or waits for the create (and then finds the CQ: the context
	 * closes it first, the channel refuses with EBUSY).
	 * @throws IllegalArgumentException when the channel or the parent domain belongs to
	 * another context
	 * @throws IllegalStateException when the channel or the parent domain is closed
	 */
	protected static <T extends ExtendedCompletionQueue> T createHolding(Context context, CqInitAttributes attributes,
			java.util.function.Supplier<T> create) {
		checkChannel(context, attributes.channel());
		CqExCreation.checkParentDomain(context, attributes.parentDomain());
		// the context too, until the CQ is wrapped and registered: a CQ refused then is
		// destroyed through cq->context, which a concurrent close must not have freed
		return holdingOpen(context, null, () -> holdingOpen(attributes.channel(), attributes.parentDomain(), create));
	}

	/**
	 * Creates a CQ with a provider's verb, for this class and the provider packages of
	 * this module, inside {@link #createHolding} (which holds the context, the channel
	 * and the parent domain open): fills {@code struct ibv_cq_init_attr_ex} from
	 * {@code attributes}, calls {@code verb}, and checks that the provider set the
	 * iterator.
	 * @param detail appended to the error message (the provider's own attributes)
	 * @return the {@code struct ibv_cq_ex} (readable as one)
	 * @throws VerbsException with the errno when the verb returns NULL or leaves an
	 * iterator pointer NULL (the CQ destroyed then)
	 */
	@SuppressWarnings("exports") // on purpose: only this module can name the type
	protected static MemorySegment createNative(Context context, CqInitAttributes attributes, String verb,
			String detail, CqCreateCall call) {
		return CqExCreation.createNative(context, attributes, verb, detail, call);
	}

	/**
	 * Wraps {@code cq}, which {@link #createNative} returned, in the object {@code wrap}
	 * builds (inside {@link #createHolding}): when that fails, forgets the half-built
	 * object (its context and channel drop it) and destroys the CQ
	 * ({@code ibv_destroy_cq}) before rethrowing.
	 */
	protected static <T extends ExtendedCompletionQueue> T adoptCreated(MemorySegment cq,
			java.util.function.Supplier<T> wrap) {
		return adopt(wrap, () -> Native.callIntVerb(Ibverbs.DESTROY_CQ, cq));
	}

	/**
	 * The provider functions of {@code context} and libibverbs' {@code ibv_destroy_cq},
	 * for the constructor.
	 */
	@SuppressWarnings("exports") // on purpose: only this module can name the type
	protected static CqProviderCalls providerCalls(Context context) {
		return CqProviderCalls.of(context.handle);
	}

	/** The {@code wc_flags} requested at creation. */
	public long wcFlags() {
		return wcFlags;
	}

	/** True when field {@code flag} was requested at creation and can be read. */
	public boolean provides(WcExFlag flag) {
		return (wcFlags & flag.bit()) != 0;
	}

	/** The {@code flags} given at creation ({@link CqCreateFlag} bits). */
	public int createFlags() {
		return createFlags;
	}

	@Override
	boolean providerLockFree() {
		return (createFlags & CqCreateFlag.SINGLE_THREADED.bit()) != 0;
	}

	/**
	 * False when this CQ polls one completion per start/end batch (Soft-RoCE before
	 * rdma-core 59).
	 */
	public boolean usesBatchIterator() {
		return batchIterator;
	}

	/**
	 * True while the iterator of this CQ stands on a completion for this thread, whose
	 * fields may be read: inside a poll's handler, or after a {@link #startPoll()} or
	 * {@link #nextPoll()} that returned true, until the next {@link #nextPoll()} or
	 * {@link #endPoll()}.
	 */
	protected final boolean hasCurrentCompletion() {
		return currentOn == Thread.currentThread();
	}

	/**
	 * True between a successful {@code ibv_start_poll} and its {@code ibv_end_poll} on
	 * this thread, where Java code may run: a raw batch ({@link #startPoll()}, also after
	 * {@link #nextPoll()} returned false) or a poll's handler. Two plain reads of fields
	 * that only the polling thread sets to itself, so exact for the calling thread; read
	 * by close paths only, nothing is added to the poll path.
	 */
	@Override
	final boolean batchOpenOnCurrentThread() {
		Thread me = Thread.currentThread();
		return batchThread == me || currentOn == me;
	}

	/**
	 * Why no completion is readable on this thread ({@link #hasCurrentCompletion()} is
	 * false), naming {@code what} was read.
	 */
	protected final IllegalStateException noCurrentCompletion(String what) {
		if (batchThread == Thread.currentThread()) {
			return new IllegalStateException(what + " after nextPoll() returned false or failed: the batch of "
					+ describe() + " has no current completion (call endPoll())");
		}
		return new IllegalStateException(what + " outside a poll callback, outside a startPoll()..endPoll() batch, "
				+ "or on another thread than the polling one, on " + describe());
	}

	// ------------------------------------------------------------------ the raw iterator

	/**
	 * {@code ibv_start_poll}: starts a batch. Returns false (ENOENT) when the CQ is
	 * empty; then no {@link #endPoll()} may follow. After true, {@link #current()} is the
	 * first completion and {@link #endPoll()} must be called exactly once, on this
	 * thread; until then the CQ is this thread's alone (its exclusive slot): another
	 * thread's poll waits, this thread's poll, resize, close or second startPoll() is
	 * refused.
	 * @throws VerbsException on a provider error (no {@code end_poll} then)
	 * @throws IllegalStateException when closed, or when this thread is already inside a
	 * poll or batch of this CQ
	 */
	public boolean startPoll() {
		enterExclusive("ibv_start_poll");
		int rc;
		try {
			rc = start();
		}
		catch (RuntimeException | Error e) {
			exitExclusive();
			throw e;
		}
		if (rc == 0) {
			Thread me = Thread.currentThread();
			batchThread = me;
			currentOn = me;
			rawBatch = true;
			return true;
		}
		exitExclusive();
		if (rc == ENOENT) {
			return false;
		}
		throw new VerbsException("ibv_start_poll", rc, describe());
	}

	/**
	 * {@code ibv_next_poll}: advances to the next completion. Returns false (ENOENT) when
	 * there is none in this batch; call {@link #endPoll()}, a later {@link #startPoll()}
	 * finds what arrived since. Where the provider mishandles that ENOENT (Soft-RoCE
	 * before rdma-core 59: a corrupted consumer index before 55, and on 55-58 still a
	 * second unlock of the CQ's spinlock, fixed in v59, so 59 is the exact cut-off; see
	 * the class comment) a batch holds one completion: this returns false without calling
	 * the provider ({@link #usesBatchIterator()} is false).
	 *
	 * <p>
	 * Once it returned false or threw, the batch has no current completion:
	 * {@link #current()}, a view obtained before, and another {@code nextPoll()} throw
	 * {@link IllegalStateException} without calling the provider (ibv_create_cq_ex(3):
	 * fields may be read only after start_poll or next_poll succeeded); only
	 * {@link #endPoll()} remains.
	 * @throws VerbsException on a provider error; {@link #endPoll()} must still be called
	 * @throws IllegalStateException without a batch started by {@link #startPoll()} on
	 * this thread, or after a nextPoll() of this batch returned false or threw
	 */
	public boolean nextPoll() {
		requireRawBatch("ibv_next_poll");
		Thread me = Thread.currentThread();
		if (currentOn != me) {
			throw noCurrentCompletion("ibv_next_poll");
		}
		currentOn = null;
		if (!batchIterator) {
			return false;
		}
		int rc = next();
		if (rc == 0) {
			currentOn = me;
			return true;
		}
		if (rc == ENOENT) {
			return false;
		}
		throw new VerbsException("ibv_next_poll", rc, describe());
	}

	/**
	 * {@code ibv_end_poll}: ends the batch opened by a successful {@link #startPoll()} on
	 * this thread and frees the CQ for other threads.
	 * @throws IllegalStateException without a batch started by {@link #startPoll()} on
	 * this thread
	 */
	public void endPoll() {
		requireRawBatch("ibv_end_poll");
		batchThread = null;
		currentOn = null;
		rawBatch = false;
		try {
			end();
		}
		finally {
			exitExclusive();
		}
	}

	private void requireRawBatch(String verb) {
		if (batchThread != Thread.currentThread() || !rawBatch) {
			throw new IllegalStateException(
					verb + " without a batch started by startPoll() on this thread on " + describe());
		}
	}

	/**
	 * The current completion of the open batch: a lazy view, valid until the next
	 * {@link #nextPoll()}/{@link #endPoll()} on this thread (the same object for every
	 * completion; {@link WorkCompletion#copy()} keeps one). Reading it afterwards throws
	 * {@link IllegalStateException} without calling the provider.
	 * @throws IllegalStateException without a batch started by {@link #startPoll()} on
	 * this thread, or after a {@link #nextPoll()} that returned false or threw
	 */
	public WorkCompletion current() {
		requireRawBatch("reading a completion");
		if (currentOn != Thread.currentThread()) {
			throw noCurrentCompletion("reading a completion");
		}
		return current;
	}

	/*
	 * Each downcall sits in its own method of a few bytecodes: the JIT inlines methods
	 * that small at every call site, where larger ones were left as calls at the sites it
	 * judged not hot enough (-XX:+PrintInlining: "callee is too large"), on a path that
	 * makes three downcalls per completion on rxe.
	 */
	private int start() {
		try {
			return (int) Ibverbs.FP_START_POLL.invokeExact(startPoll, cq, pollAttrAddress);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	private int next() {
		return readers.readInt(nextPoll);
	}

	private void end() {
		try {
			Ibverbs.FP_END_POLL.invokeExact(endPoll, cq);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	// ------------------------------------------------------------------ polling

	/**
	 * Drains up to {@code buffer.capacity()} completions with {@code ibv_start_poll},
	 * {@code ibv_next_poll} and {@code ibv_end_poll}, handing each to {@code handler} as
	 * a lazy view (fields are read through the provider's readers only when asked for,
	 * and only during the handler's call). Allocation-free. A handler that throws stops
	 * the drain at its completion (the rest stay queued on the CQ); {@code ibv_end_poll}
	 * still runs. When a verb of the iterator fails, the completions taken before it have
	 * already been handed to the handler; the {@link VerbsException} says how many. (It
	 * overrides the legacy poll whole, not a hook inside it: a hook's call site, shared
	 * by both kinds, would carry one JIT type profile for both.)
	 */
	@Override
	public int poll(WorkCompletionBuffer buffer, CompletionHandler handler) {
		enterExclusive("ibv_start_poll");
		try {
			buffer.claim();
			try {
				return iterate(buffer.capacity(), handler, null);
			}
			finally {
				buffer.unclaim();
			}
		}
		finally {
			exitExclusive();
		}
	}

	/**
	 * Drains up to {@code buffer.capacity()} completions with {@code ibv_start_poll},
	 * {@code ibv_next_poll} and {@code ibv_end_poll}, and copies every field this CQ
	 * provides into {@code buffer} (the extended fields included), for batch consumers.
	 * Allocation-free. Exclusive per CQ as
	 * {@link CompletionQueue#poll(WorkCompletionBuffer)}.
	 *
	 * <p>
	 * <b>A provider failure loses nothing already taken.</b> A completion the iterator
	 * has passed cannot be returned to the CQ ({@code ibv_poll_cq(3)}). When
	 * {@code ibv_next_poll} (or, on a CQ that polls one completion per batch, a later
	 * {@code ibv_start_poll}) fails after {@code k} completions were taken, those
	 * {@code k} are in {@code buffer} ({@code buffer.size() == k}, readable with
	 * {@link WorkCompletionBuffer#get(int)} until the next poll into it) and the
	 * {@link VerbsException} names the verb, its code and {@code k}. Handle them before
	 * polling into the buffer again.
	 * @return the number of completions copied, 0 when the CQ is empty
	 * @throws VerbsException when a verb of the iterator fails; {@code buffer} then holds
	 * the completions taken before the failure (0 when {@code ibv_start_poll} failed
	 * first), and {@code ibv_end_poll} has ended the batch
	 * @throws IllegalStateException when this CQ or the buffer is closed, or the call
	 * re-enters this CQ's poll
	 */
	@Override
	public int poll(WorkCompletionBuffer buffer) {
		enterExclusive("ibv_start_poll");
		try {
			buffer.claim();
			try {
				int n = iterate(buffer.capacity(), null, buffer);
				buffer.filledByIterator(n, wcFlags);
				return n;
			}
			finally {
				buffer.unclaim();
			}
		}
		finally {
			exitExclusive();
		}
	}

	private int iterate(int max, @Nullable CompletionHandler handler, @Nullable WorkCompletionBuffer copyTo) {
		// An empty CQ, what a busy poller sees most: one downcall and nothing more. This
		// method stays small enough to
		// be inlined into the poll; the loop of iterateFrom is not.
		int rc = start();
		return rc == ENOENT ? 0 : iterateFrom(rc, max, handler, copyTo);
	}

	/**
	 * The iterator from a start_poll that returned {@code rc} (not ENOENT), up to
	 * {@code max} completions.
	 */
	private int iterateFrom(int rc, int max, @Nullable CompletionHandler handler,
			@Nullable WorkCompletionBuffer copyTo) {
		int n = 0;
		while (true) {
			if (rc != 0) {
				throw iteratorFailed("ibv_start_poll", rc, n, copyTo);
			}
			currentOn = Thread.currentThread();
			try {
				deliver(n++, handler, copyTo);
				if (batchIterator) {
					while (n < max) {
						rc = next();
						if (rc == ENOENT) {
							return n;
						}
						if (rc != 0) {
							throw iteratorFailed("ibv_next_poll", rc, n, copyTo);
						}
						deliver(n++, handler, copyTo);
					}
					return n;
				}
			}
			finally {
				currentOn = null;
				end();
			}
			if (n >= max) {
				return n;
			}
			rc = start();
			if (rc == ENOENT) {
				return n;
			}
		}
	}

	/**
	 * The error of a failed {@code verb} after {@code taken} completions were taken off
	 * the CQ: a batch copy makes them the buffer's contents, so that none is lost.
	 */
	private VerbsException iteratorFailed(String verb, int rc, int taken, @Nullable WorkCompletionBuffer copyTo) {
		if (copyTo != null) {
			copyTo.filledByIterator(taken, wcFlags);
		}
		return new VerbsException(verb, rc, describe() + "; " + taken + " completion(s) taken off the CQ before it "
				+ (copyTo != null ? "are in the buffer (its size())" : "were handed to the handler"));
	}

	private void deliver(int index, @Nullable CompletionHandler handler, @Nullable WorkCompletionBuffer copyTo) {
		if (handler != null) {
			handler.onCompletion(current);
		}
		else {
			copyTo.copyCurrent(index, readers);
		}
	}

	@Override
	void destroyed() {
		arena.close();
	}

	@Override
	void abandoned() {
		super.abandoned();
		if (arena != null) {
			arena.close();
		}
	}

}
