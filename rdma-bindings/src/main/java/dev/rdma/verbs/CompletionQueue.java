package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.CqProviderCalls;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A completion queue ({@code struct ibv_cq *}) created by {@code ibv_create_cq}, polled
 * with {@code ibv_poll_cq}. {@link ExtendedCompletionQueue} and
 * {@code dev.rdma.verbs.efa.EfaCompletionQueue} extend it.
 *
 * <p>
 * <b>Events.</b> With a {@link CompletionChannel}, {@link #requestNotify(boolean)}
 * ({@code ibv_req_notify_cq}) arms the CQ for one event. Every event got through the
 * channel is counted on the CQ it names ({@link #eventsGot()}); {@link #ackEvents()}
 * acknowledges them in one {@code ibv_ack_cq_events} call. {@link #close()} acknowledges
 * every got-but-unacked event first, because {@code ibv_destroy_cq} waits for them
 * forever; acks can never exceed gets.
 *
 * <p>
 * <b>Threads.</b> Every call is thread-safe. Polls, resizes and (extended CQs) iterator
 * batches of one CQ run one at a time: a second thread waits for the first in Java (up to
 * 10 s), the same thread re-entering from a handler is refused with
 * {@link IllegalStateException} (see {@link #poll(WorkCompletionBuffer)}). Completions
 * are in CQ order for a single polling thread. {@link #close()} from another thread waits
 * for a poll in flight to return; later polls throw {@link IllegalStateException}.
 */
public class CompletionQueue extends NativeObject {

	/**
	 * Null only for a CQ over memory that is not a device's (the tests' and benchmarks'
	 * rings).
	 */
	final @Nullable Context context;

	final @Nullable CompletionChannel channel;

	/** {@link #handle}'s address, as the poll-path downcalls take it. */
	final long cq;

	private final int compVector;

	private final MemorySegment pollFn;

	private final MemorySegment notifyFn;

	private final MemorySegment destroyFn;

	private final String deviceName;

	/** The channel events got and acked for this CQ, and the destroy that acks them. */
	private final CqEventCounts events = new CqEventCounts(this);

	private final AtomicLong asyncErrors = new AtomicLong();

	/** See {@link #attach(Object)}. */
	private volatile @Nullable Object attachment;

	private static final VarHandle ATTACHMENT = VarHandles.field(MethodHandles.lookup(), "attachment", Object.class);

	/*
	 * One rule for every call that touches the provider's CQ state - ibv_poll_cq, the
	 * extended iterator from start_poll to end_poll, ibv_resize_cq - : it runs in this
	 * CQ's exclusive slot.
	 *
	 * Why: providers guard a CQ with a spinlock (rxe: pthread_spin_lock), and the
	 * extended iterator holds it from start_poll to end_poll, across Java code (the
	 * handler, or the caller between startPoll() and endPoll()). The poll-path downcalls
	 * are critical (no thread-state transition), so a thread spinning for that lock
	 * inside one could never reach a safepoint while the holder, in Java, waits at the
	 * safepoint: the whole JVM would stop. Under the slot no downcall of this binding
	 * ever waits for a lock that Java code may hold: another thread waits for the slot in
	 * Java (where safepoints reach it, bounded), the same thread re-entering is refused
	 * before any native call, and close() waits for the slot to be free before
	 * ibv_destroy_cq.
	 *
	 * The slot is biased to the thread that polls (ExclusiveSlot): entering costs an
	 * opaque store and two plain reads on that thread. Its pairing with close(): close()
	 * sets the closing flag, then revokes the bias (membarrier), then waits for the slot
	 * (NativeObject.close -> beforeClose, idle()); a poller takes the slot, then reads
	 * the closing flag. Either the poller sees "closing" and backs off, or close() sees
	 * the poller in the slot and waits.
	 */
	private final ExclusiveSlot slot = new ExclusiveSlot();

	/** The QPs using this CQ, one entry per use ({@link #addUser}); guarded by itself. */
	private final List<NativeObject> users = new ArrayList<>();

	/**
	 * @param context the owner; null for a CQ over memory that is not a device's (the
	 * tests' and benchmarks' rings, built through {@code dev.rdma.verbs.seam})
	 * @param name what {@link #describe()} calls the device
	 */
	CompletionQueue(@Nullable Context context, String name, MemorySegment cq, @Nullable CompletionChannel channel,
			int compVector, CqProviderCalls calls) {
		super(cq, context);
		if (Native.isNull(calls.destroyCq())) {
			throw new IllegalArgumentException("a CQ needs a destroy function");
		}
		this.cq = cq.address();
		this.context = context;
		this.deviceName = name;
		this.channel = channel;
		this.compVector = compVector;
		this.pollFn = calls.pollCq();
		this.notifyFn = calls.reqNotifyCq();
		this.destroyFn = calls.destroyCq();
		if (channel != null) {
			channel.register(this);
			// Acks come in batches, so the first may come long after the traffic started:
			// link the call now
			// (the JVM generates classes when a method handle call site first runs: ~100
			// objects, milliseconds)
			events.nativeAck(0);
		}
	}

	/**
	 * {@code cq->context->ops.poll_cq} as read at creation (what
	 * {@link #poll(WorkCompletionBuffer)} calls).
	 */
	final MemorySegment pollFn() {
		return pollFn;
	}

	static CompletionQueue create(Context context, int cqe, @Nullable CompletionChannel channel, int compVector) {
		checkChannel(context, channel);
		// the context and the channel held open until the CQ is registered with both: a
		// close() of either on another thread is refused before the create ("closed"),
		// or waits for it and then finds the CQ (the context closes it first, the channel
		// refuses: EBUSY); it never frees the channel while ibv_create_cq reads
		// channel->fd and increments channel->refcnt, nor the context while the CQ is
		// wrapped (ibv_destroy_cq of a refused CQ reads cq->context)
		return holdingOpen(context, channel, () -> createHeld(context, cqe, channel, compVector));
	}

	/** {@link #create} with the context and the channel held open. */
	private static CompletionQueue createHeld(Context context, int cqe, @Nullable CompletionChannel channel,
			int compVector) {
		MemorySegment cq;
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment channelHandle = channel == null ? MemorySegment.NULL : channel.handle;
			cq = (MemorySegment) Ibverbs.CREATE_CQ.invokeExact(capture, context.handle, cqe, MemorySegment.NULL,
					channelHandle, compVector);
			if (Native.isNull(cq)) {
				int errno = Native.errno(capture);
				throw new VerbsException("ibv_create_cq", errno,
						LockedMemory.detail("ibv_create_cq", errno, "cqe=" + cqe + ", comp_vector=" + compVector
								+ " of " + context.numCompVectors() + ", device " + context.deviceName()));
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		CqProviderCalls calls = CqProviderCalls.of(context.handle);
		if (Native.isNull(calls.pollCq())) {
			destroyVerb(Ibverbs.DESTROY_CQ, cq, "ibv_destroy_cq", "a CQ of " + context.deviceName());
			throw new VerbsException("ibv_poll_cq", Errno.EOPNOTSUPP,
					"the provider of " + context.deviceName() + " has no poll_cq");
		}
		MemorySegment created = cq;
		return adopt(() -> new CompletionQueue(context, context.deviceName(),
				created.reinterpret(Layouts.IBV_CQ.byteSize()), channel, compVector, calls),
				() -> Native.callIntVerb(Ibverbs.DESTROY_CQ, created));
	}

	static void checkChannel(Context context, @Nullable CompletionChannel channel) {
		if (channel != null) {
			channel.ensureOpen();
			if (channel.context() != context) {
				throw new IllegalArgumentException(
						channel + " belongs to another context than " + context.deviceName());
			}
		}
	}

	/**
	 * The context that created this CQ (the {@code context} of {@code ibv_create_cq} or
	 * {@code ibv_create_cq_ex}); it closes this CQ when it is closed. Never null for a CQ
	 * that a {@link Context} created; null only for a CQ over memory that is not a
	 * device's (the tests' and benchmarks' rings, built through
	 * {@code dev.rdma.verbs.seam}).
	 */
	public Context context() {
		return context;
	}

	/** The completion channel of this CQ, or null. */
	public @Nullable CompletionChannel channel() {
		return channel;
	}

	/**
	 * The {@code comp_vector} given at creation ({@code ibv_create_cq}'s argument, or
	 * {@code ibv_cq_init_attr_ex.comp_vector}): the completion vector, 0 ..
	 * {@link Context#numCompVectors()} - 1, whose interrupt signals this CQ's events.
	 */
	public int compVector() {
		return compVector;
	}

	/**
	 * Attaches {@code attachment} to this CQ, replacing the one before, as
	 * {@link java.nio.channels.SelectionKey#attach} does: the place for the caller's own
	 * identity or state of a CQ. The binding passes {@code cq_context} as NULL to
	 * {@code ibv_create_cq} / {@code ibv_create_cq_ex}; the CQ that
	 * {@link CompletionChannel#getEvent()} returns is this very object (found by the
	 * {@code struct ibv_cq *} that {@code ibv_get_cq_event} returns), so its
	 * {@link #attachment()} is what was attached here. Thread-safe (a volatile field);
	 * attach before {@link #requestNotify(boolean)} for the event thread to see it.
	 * Allowed after {@link #close()} too (no native call).
	 * @param attachment any object, or null to detach
	 * @return the previous attachment, or null
	 */
	public final @Nullable Object attach(@Nullable Object attachment) {
		return ATTACHMENT.getAndSet(this, attachment);
	}

	/**
	 * The object last given to {@link #attach(Object)}, or null. No native call,
	 * allocation-free.
	 */
	public final @Nullable Object attachment() {
		return attachment;
	}

	/**
	 * {@code cq->cqe}: the actual number of entries (at least what was asked; changes on
	 * resize).
	 */
	public int cqe() {
		acquire();
		try {
			return handle.get(JAVA_INT, Layouts.CQ_CQE);
		}
		finally {
			release();
		}
	}

	@Override
	String describe() {
		return getClass().getSimpleName() + "[" + deviceName + ", 0x" + Long.toHexString(address()) + "]";
	}

	// ------------------------------------------------------------------ polling

	/**
	 * Polls up to {@code buffer.capacity()} completions into {@code buffer}
	 * ({@code ibv_poll_cq}, through {@code cq->context->ops.poll_cq}; an extended CQ
	 * overrides it with its iterator). Allocation-free.
	 *
	 * <p>
	 * <b>Exclusive per CQ.</b> A poll, a {@link #resize(int) resize} or an extended CQ's
	 * iterator batch runs alone on a CQ: another thread waits for it (up to 10 s, in
	 * Java); the same thread calling in again from a handler is refused with
	 * {@link IllegalStateException} before anything is taken off the CQ. The buffer is
	 * claimed for the call: a closed buffer, or one another poll is filling, is refused
	 * the same way.
	 * @return the number of completions, 0 when the CQ is empty
	 * @throws VerbsException when the provider fails (negative return, kept as is)
	 * @throws IllegalStateException when this CQ or the buffer is closed, or the call
	 * re-enters this CQ's poll
	 */
	public int poll(WorkCompletionBuffer buffer) {
		// pollFn is never NULL here: create() refuses a provider without poll_cq, and the
		// extended CQs, which may have none, override this poll
		return pollCqExclusive(buffer);
	}

	/**
	 * {@code ibv_poll_cq} on any CQ, also an extended or EFA one (an {@code ibv_cq_ex} is
	 * an {@code ibv_cq}, and the man page allows both ways of polling it; never both at
	 * once, which the exclusive slot guarantees): every {@code ibv_wc} field the provider
	 * writes, the extended-only fields not at all. Otherwise as
	 * {@link #poll(WorkCompletionBuffer)}.
	 * @throws VerbsException EOPNOTSUPP when the provider has no {@code poll_cq}
	 */
	public final int pollCq(WorkCompletionBuffer buffer) {
		if (Native.isNull(pollFn)) {
			throw new VerbsException("ibv_poll_cq", Errno.EOPNOTSUPP, "no poll_cq for " + describe());
		}
		return pollCqExclusive(buffer);
	}

	/**
	 * ibv_poll_cq into {@code buffer}, in the exclusive slot, with the buffer claimed.
	 */
	private int pollCqExclusive(WorkCompletionBuffer buffer) {
		enterExclusive("ibv_poll_cq");
		try {
			buffer.claim();
			try {
				return pollCqInto(buffer);
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
	 * Takes this CQ's exclusive slot for {@code verb} (see the comment at {@link #slot}):
	 * at once when free, after waiting (in Java, at most 10 s) when another thread holds
	 * it; refused when this thread holds it.
	 * @throws IllegalStateException when closed or closing, on re-entry, or when the slot
	 * stays busy for 10 s
	 */
	final void enterExclusive(String verb) {
		slot.enter(verb, this, true);
		if (closing()) {
			slot.exit();
			throw closedException();
		}
	}

	final void exitExclusive() {
		slot.exit();
	}

	@Override
	void beforeClose() {
		slot.revoke();
	}

	@Override
	final boolean idle() {
		return slot.isFree();
	}

	/** ibv_poll_cq into the claimed buffer, in the exclusive slot. */
	final int pollCqInto(WorkCompletionBuffer buffer) {
		int n;
		try {
			n = (int) Ibverbs.FP_POLL_CQ.invokeExact(pollFn, this.cq, buffer.capacity(), buffer.wcsAddress);
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
		if (n < 0) {
			buffer.filledByPollCq(0);
			throw new VerbsException("ibv_poll_cq", n, describe());
		}
		buffer.filledByPollCq(n);
		return n;
	}

	/**
	 * Polls up to {@code buffer.capacity()} completions and hands each to
	 * {@code handler}, in CQ order, on this thread. The view is valid only during the
	 * call. Allocation-free. Exclusive per CQ as {@link #poll(WorkCompletionBuffer)}: the
	 * handler may not poll, resize or close this CQ, nor close the buffer
	 * ({@link IllegalStateException}); it may use any other CQ.
	 *
	 * <p>
	 * A handler that throws loses nothing: the completions already taken off the CQ into
	 * the buffer are still handed to the handler, then the first exception is rethrown
	 * (later ones added as suppressed). (An extended CQ stops at the throwing completion
	 * instead; the rest stay queued on the CQ.)
	 * @return the number of completions handled
	 */
	public int poll(WorkCompletionBuffer buffer, CompletionHandler handler) {
		enterExclusive("ibv_poll_cq");
		try {
			buffer.claim();
			try {
				int n = pollCqInto(buffer);
				int i = 0;
				try {
					for (; i < n; i++) {
						handler.onCompletion(buffer.get(i));
					}
				}
				catch (RuntimeException | Error e) {
					// around the loop, not in it: the loop stays as tight as without the
					// handling
					deliverRest(buffer, handler, i + 1, n, e);
					throw e;
				}
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

	/**
	 * After the handler threw {@code first}: the completions after it, each exception
	 * suppressed into the first.
	 */
	private static void deliverRest(WorkCompletionBuffer buffer, CompletionHandler handler, int from, int n,
			Throwable first) {
		for (int i = from; i < n; i++) {
			try {
				handler.onCompletion(buffer.get(i));
			}
			catch (RuntimeException | Error e) {
				first.addSuppressed(e);
			}
		}
	}

	/**
	 * True while the calling thread is inside an iterator batch of this CQ, between
	 * {@code ibv_start_poll} and {@code ibv_end_poll}, with Java code running: the
	 * handler of an extended CQ's poll, or {@code startPoll()} .. {@code endPoll()}. The
	 * provider holds the CQ's lock then (mlx5, mlx4, efa, irdma, rxe), so a verb that
	 * takes it on this thread ({@code ibv_destroy_qp} of a QP on this CQ) would spin for
	 * ever. Always false for a legacy CQ: {@code ibv_poll_cq} releases the lock before it
	 * returns, before any handler runs. For close paths, not the poll path.
	 */
	boolean batchOpenOnCurrentThread() {
		return false;
	}

	/**
	 * Whether the provider may skip its own CQ lock ({@code SINGLE_THREADED}, only an
	 * extended CQ): then nothing but this binding keeps {@code ibv_destroy_qp}'s cleaning
	 * of the CQ apart from a poll, and the QP's close takes the exclusive slot.
	 */
	boolean providerLockFree() {
		return false;
	}

	@Override
	void checkCloseAllowed() {
		if (slot.heldByCurrentThread()) {
			throw new IllegalStateException("cannot close " + describe() + " from inside its own poll callback (or "
					+ "between startPoll() and endPoll())");
		}
		// What ibv_destroy_cq would refuse with EBUSY, refused before anything changes
		// (no event acked, no waiter
		// woken): a QP of this binding still uses the CQ.
		List<NativeObject> current;
		synchronized (users) {
			current = List.copyOf(users);
		}
		if (!current.isEmpty()) {
			throw new VerbsException("ibv_destroy_cq", Errno.EBUSY,
					describe() + " is still used by " + current + ": close the QP(s) first");
		}
	}

	/**
	 * Registers a QP that uses this CQ (once per use: as send and as receive CQ), so that
	 * {@link #close()} refuses while it exists. The QP registers itself; the CQ knows it
	 * only as a native object (no dependency on the QP's class).
	 */
	final void addUser(NativeObject queuePair) {
		synchronized (users) {
			users.add(queuePair);
		}
	}

	/** Undoes one {@link #addUser}, once the QP is destroyed. */
	final void removeUser(NativeObject queuePair) {
		synchronized (users) {
			users.remove(queuePair);
		}
	}

	/**
	 * {@code ibv_req_notify_cq}: arms the CQ so that the next completion (or, with
	 * {@code solicitedOnly}, the next solicited one) raises one event on its channel. A
	 * completion is solicited when it is a receive completion of a message sent with the
	 * solicited-event bit ({@code IBV_SEND_SOLICITED}), or when its status is not success
	 * (ibv_req_notify_cq(3); rxe raises the event for failed receive completions only).
	 */
	public void requestNotify(boolean solicitedOnly) {
		if (channel == null) {
			throw new IllegalStateException(describe() + " has no completion channel: it cannot raise events");
		}
		if (Native.isNull(notifyFn)) {
			throw new VerbsException("ibv_req_notify_cq", Errno.EOPNOTSUPP, "the provider has no req_notify_cq");
		}
		acquire();
		try {
			int rc = (int) Ibverbs.FP_REQ_NOTIFY_CQ.invokeExact(notifyFn, this.cq, solicitedOnly ? 1 : 0);
			if (rc != 0) {
				throw new VerbsException("ibv_req_notify_cq", rc, describe());
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_resize_cq}: at least {@code cqe} entries; {@link #cqe()} tells the new
	 * size. Runs in this CQ's exclusive slot (the provider swaps the queue buffer under
	 * its CQ lock): it waits for a poll on another thread, and is refused with
	 * {@link IllegalStateException} from inside a poll of this CQ on this thread.
	 */
	public void resize(int cqe) {
		enterExclusive("ibv_resize_cq");
		try {
			int rc = (int) Ibverbs.RESIZE_CQ.invokeExact(handle, cqe);
			if (rc != 0) {
				throw new VerbsException("ibv_resize_cq", rc, "cqe=" + cqe + " on " + describe());
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			exitExclusive();
		}
	}

	// ------------------------------------------------------------------ event accounting

	void eventGot() {
		events.got();
	}

	/** Events got from the channel for this CQ so far. */
	public long eventsGot() {
		return events.gotCount();
	}

	/** Events acknowledged so far. */
	public long eventsAcked() {
		return events.ackedCount();
	}

	/** Events got and not yet acknowledged. */
	public long eventsUnacked() {
		return events.unacked();
	}

	/**
	 * {@code ibv_ack_cq_events} for every got-but-unacked event, in one call. Returns how
	 * many were acked.
	 */
	public int ackEvents() {
		return events.ackAll();
	}

	/**
	 * {@code ibv_ack_cq_events(cq, n)}.
	 * @throws IllegalArgumentException when {@code n} exceeds the unacked events
	 * (over-acking hangs destroy)
	 */
	public void ackEvents(int n) {
		events.ack(n);
	}

	/**
	 * {@code IBV_EVENT_CQ_ERR} async events seen for this CQ (overrun): the CQ is then
	 * unusable.
	 */
	public long asyncErrors() {
		return asyncErrors.get();
	}

	void recordAsyncError() {
		asyncErrors.incrementAndGet();
	}

	// ------------------------------------------------------------------ destroy

	/** Construction failed after the channel registered this CQ: the channel drops it. */
	@Override
	void abandoned() {
		if (channel != null) {
			channel.unregister(this);
		}
	}

	@Override
	final void destroy() {
		if (channel != null) {
			synchronized (channel.eventLock) {
				channel.pauseReader();
				try {
					ackAndDestroy();
					// under the same lock: once the lock is free, a CQ that malloc puts
					// at the freed address can register, and an event of it must never
					// be counted on this destroyed one (its got-count would stay 0, so
					// its own destroy would wait forever for an ack)
					channel.unregister(this);
				}
				finally {
					channel.resumeReader();
				}
			}
		}
		else {
			ackAndDestroy();
		}
	}

	private void ackAndDestroy() {
		events.ackAllAndDestroy(() -> {
			int rc;
			try {
				rc = (int) Ibverbs.FP_DESTROY.invokeExact(destroyFn, handle);
			}
			catch (Throwable t) {
				throw new IllegalStateException(t);
			}
			if (rc != 0) {
				throw new VerbsException("ibv_destroy_cq", rc, describe());
			}
		});
		destroyed();
	}

	/** Frees Java-side resources after ibv_destroy_cq succeeded. */
	void destroyed() {
	}

}
