package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A completion queue ({@code struct ibv_cq *}) created by {@code ibv_create_cq}, polled with {@code ibv_poll_cq}.
 * {@link ExtendedCompletionQueue} and {@link EfaCompletionQueue} extend it.
 *
 * <p><b>Events.</b> With a {@link CompletionChannel}, {@link #requestNotify(boolean)} ({@code ibv_req_notify_cq})
 * arms the CQ for one event. Every event got through the channel is counted on the CQ it names ({@link #eventsGot()});
 * {@link #ackEvents()} acknowledges them in one {@code ibv_ack_cq_events} call. {@link #close()} acknowledges every
 * got-but-unacked event first, because {@code ibv_destroy_cq} waits for them forever; acks can never exceed gets.
 *
 * <p><b>Threads.</b> Polling is thread-safe as far as the provider's lock allows, but completions are only ordered
 * for a single polling thread. {@link #close()} from another thread waits for a poll in flight to return; later polls
 * throw {@link IllegalStateException}.
 */
public class CompletionQueue extends NativeObject {

    final Context context;
    final CompletionChannel channel;
    /** {@link #handle}'s address, as the poll-path downcalls take it. */
    final long cq;
    private final int compVector;
    private final MemorySegment pollFn;
    private final MemorySegment notifyFn;
    private final AtomicLong eventsGot = new AtomicLong();
    private final AtomicLong eventsAcked = new AtomicLong();
    private final AtomicLong asyncErrors = new AtomicLong();
    private final Object ackLock = new Object();
    /** The thread inside a poll of this CQ, to refuse a close from inside its own callback. */
    private Thread pollingThread;

    /*
     * The poll path's in-flight accounting. The first thread that polls becomes the CQ's owner (a CQ normally has one
     * polling thread). The owner marks "in poll" with an opaque store and then reads the closing flag: no atomic
     * update, no fence. close() sets the closing flag, then calls membarrier(MEMBARRIER_CMD_GLOBAL), which makes every
     * thread pass a full memory barrier: afterwards either the owner sees "closing" and backs off, or close() sees the
     * owner's mark and waits for it to clear (the asymmetric Dekker pattern of userspace RCU). Other threads, and every
     * thread when the kernel has no membarrier, use the atomic acquire()/release() of NativeObject.
     */
    private static final VarHandle OWNER;
    private static final VarHandle OWNER_DEPTH;

    static {
        try {
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            OWNER = lookup.findVarHandle(CompletionQueue.class, "owner", Thread.class);
            OWNER_DEPTH = lookup.findVarHandle(CompletionQueue.class, "ownerDepth", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private volatile Thread owner;
    private int ownerDepth;

    /** A CQ of {@code context}; a null context makes a native stand-in (tests: never destroyed natively). */
    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel, int compVector) {
        this(context, cq, channel, compVector,
                context == null ? MemorySegment.NULL : context.handle.get(ADDRESS, Layouts.CONTEXT_POLL_CQ));
    }

    private CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel, int compVector,
            MemorySegment pollFn) {
        super(cq, context);
        this.cq = cq.address();
        this.context = context;
        this.channel = channel;
        this.compVector = compVector;
        this.pollFn = pollFn;
        this.notifyFn = context == null ? MemorySegment.NULL
                : context.handle.get(ADDRESS, Layouts.CONTEXT_REQ_NOTIFY_CQ);
        if (Native.isNull(pollFn) && context != null) {
            throw new IllegalStateException("the provider of " + context.deviceName() + " has no poll_cq");
        }
        if (channel != null) {
            channel.register(this);
            if (context != null) {
                // Acks come in batches, so the first may come long after the traffic started: link the call now
                // (the JVM generates classes when a method handle call site first runs: ~100 objects, milliseconds)
                nativeAck(0);
            }
        }
    }

    final boolean isStandIn() {
        return context == null;
    }

    /**
     * A native stand-in polled through {@code pollFn}, a C function with poll_cq's signature (benchmarks: a CQ
     * without a device). Never destroyed natively.
     */
    static CompletionQueue standIn(MemorySegment fakeCq, MemorySegment pollFn) {
        if (Native.isNull(pollFn)) {
            throw new IllegalArgumentException("a stand-in needs a poll_cq function");
        }
        return new CompletionQueue(null, fakeCq, null, 0, pollFn);
    }

    /** {@code cq->context->ops.poll_cq} as read at creation (what {@link #poll(WorkCompletionBuffer)} calls). */
    final MemorySegment pollFn() {
        return pollFn;
    }

    static CompletionQueue create(Context context, int cqe, CompletionChannel channel, int compVector) {
        checkChannel(context, channel);
        context.acquire();
        MemorySegment cq;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = Native.allocateCapture(arena);
            MemorySegment channelHandle = channel == null ? MemorySegment.NULL : channel.handle;
            cq = (MemorySegment) Ibverbs.CREATE_CQ.invokeExact(capture, context.handle, cqe, MemorySegment.NULL,
                    channelHandle, compVector);
            if (Native.isNull(cq)) {
                throw new VerbsException("ibv_create_cq", Native.errno(capture),
                        "cqe=" + cqe + ", comp_vector=" + compVector + " of " + context.numCompVectors()
                                + ", device " + context.deviceName());
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            context.release();
        }
        return new CompletionQueue(context, cq.reinterpret(Layouts.IBV_CQ.byteSize()), channel, compVector);
    }

    static void checkChannel(Context context, CompletionChannel channel) {
        if (channel != null) {
            channel.ensureOpen();
            if (channel.context() != context) {
                throw new IllegalArgumentException(channel + " belongs to another context than "
                        + context.deviceName());
            }
        }
    }

    public Context context() {
        return context;
    }

    /** The completion channel of this CQ, or null. */
    public CompletionChannel channel() {
        return channel;
    }

    public int compVector() {
        return compVector;
    }

    /** {@code cq->cqe}: the actual number of entries (at least what was asked; changes on resize). */
    public int cqe() {
        acquire();
        try {
            return handle.get(JAVA_INT, Layouts.CQ_CQE);
        } finally {
            release();
        }
    }

    @Override
    String describe() {
        return getClass().getSimpleName() + "[" + (context == null ? "stand-in" : context.deviceName()) + ", 0x"
                + Long.toHexString(address()) + "]";
    }

    // ------------------------------------------------------------------ polling

    /**
     * Polls up to {@code buffer.capacity()} completions into {@code buffer} ({@code ibv_poll_cq}, through
     * {@code cq->context->ops.poll_cq}). Allocation-free.
     *
     * @return the number of completions, 0 when the CQ is empty
     * @throws VerbsException when the provider fails (negative return, kept as is)
     */
    public int poll(WorkCompletionBuffer buffer) {
        // pollFn is never NULL here: the constructor refuses a provider without poll_cq, the stand-ins without one
        // (extended and EFA) override both polls, and the linker refuses a NULL target anyway
        boolean owned = enterPoll();
        try {
            return pollLegacy(buffer);
        } finally {
            exitPoll(owned);
        }
    }

    /** Enters a poll: the owner's fence-free path (returns true) or the atomic path (returns false). */
    final boolean enterPoll() {
        Thread current = Thread.currentThread();
        Thread o = owner;
        if (o == current || (o == null && Libc.MEMBARRIER_GLOBAL && OWNER.compareAndSet(this, null, current))) {
            int depth = (int) OWNER_DEPTH.getOpaque(this);
            OWNER_DEPTH.setOpaque(this, depth + 1);
            if (closing()) {
                OWNER_DEPTH.setRelease(this, depth);
                throw closedException();
            }
            return true;
        }
        acquire();
        return false;
    }

    final void exitPoll(boolean owned) {
        if (owned) {
            OWNER_DEPTH.setRelease(this, (int) OWNER_DEPTH.getOpaque(this) - 1);
        } else {
            release();
        }
    }

    /** The thread that polls on the fence-free path, or null (tests). */
    final Thread pollOwner() {
        return owner;
    }

    @Override
    void beforeClose() {
        if (owner != null) {
            Libc.membarrierGlobal();
        }
    }

    @Override
    final boolean idle() {
        return (int) OWNER_DEPTH.getVolatile(this) == 0;
    }

    final int pollLegacy(WorkCompletionBuffer buffer) {
        int n;
        try {
            n = (int) Ibverbs.FP_POLL_CQ.invokeExact(pollFn, this.cq, buffer.capacity(), buffer.wcsAddress);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        if (n < 0) {
            buffer.setSize(0);
            throw new VerbsException("ibv_poll_cq", n, describe());
        }
        buffer.legacy = true; // (available and efaAvailable only count for an extended CQ's contents)
        buffer.setSize(n);
        return n;
    }

    /**
     * Polls up to {@code buffer.capacity()} completions and hands each to {@code handler}, in CQ order, on this
     * thread. The view is valid only during the call. Allocation-free.
     *
     * @return the number of completions handled
     */
    public int poll(WorkCompletionBuffer buffer, CompletionHandler handler) {
        boolean owned = enterPoll();
        Thread previous = enterCallbacks();
        try {
            return pollEach(buffer, handler);
        } finally {
            exitCallbacks(previous);
            exitPoll(owned);
        }
    }

    /** Marks this thread as inside this CQ's callbacks (closing the CQ from there is refused); returns the old mark. */
    final Thread enterCallbacks() {
        Thread previous = pollingThread;
        pollingThread = Thread.currentThread();
        return previous;
    }

    final void exitCallbacks(Thread previous) {
        pollingThread = previous;
    }

    private int pollEach(WorkCompletionBuffer buffer, CompletionHandler handler) {
        int n = pollLegacy(buffer);
        for (int i = 0; i < n; i++) {
            handler.onCompletion(buffer.get(i));
        }
        return n;
    }

    @Override
    void checkCloseAllowed() {
        if (pollingThread == Thread.currentThread()) {
            throw new IllegalStateException("cannot close " + describe() + " from inside its own poll callback");
        }
    }

    /**
     * {@code ibv_req_notify_cq}: arms the CQ so that the next completion (or, with {@code solicitedOnly}, the next
     * solicited or failed receive completion) raises one event on its channel.
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
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            release();
        }
    }

    /**
     * {@code ibv_resize_cq}: at least {@code cqe} entries; {@link #cqe()} tells the new size. Must not run
     * concurrently with a poll of this CQ from another thread (the provider swaps the queue buffer).
     */
    public void resize(int cqe) {
        acquire();
        try {
            int rc = (int) Ibverbs.RESIZE_CQ.invokeExact(handle, cqe);
            if (rc != 0) {
                throw new VerbsException("ibv_resize_cq", rc, "cqe=" + cqe + " on " + describe());
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            release();
        }
    }

    // ------------------------------------------------------------------ event accounting

    void eventGot() {
        eventsGot.incrementAndGet();
    }

    /** Events got from the channel for this CQ so far. */
    public long eventsGot() {
        return eventsGot.get();
    }

    /** Events acknowledged so far. */
    public long eventsAcked() {
        return eventsAcked.get();
    }

    /** Events got and not yet acknowledged. */
    public long eventsUnacked() {
        synchronized (ackLock) {
            return eventsGot.get() - eventsAcked.get();
        }
    }

    /** {@code ibv_ack_cq_events} for every got-but-unacked event, in one call. Returns how many were acked. */
    public int ackEvents() {
        synchronized (ackLock) {
            return ack(eventsGot.get() - eventsAcked.get());
        }
    }

    /**
     * {@code ibv_ack_cq_events(cq, n)}.
     *
     * @throws IllegalArgumentException when {@code n} exceeds the unacked events (over-acking hangs destroy)
     */
    public void ackEvents(int n) {
        synchronized (ackLock) {
            long unacked = eventsGot.get() - eventsAcked.get();
            if (n < 0 || n > unacked) {
                throw new IllegalArgumentException("cannot ack " + n + " events: " + unacked + " got and unacked on "
                        + describe());
            }
            ack(n);
        }
    }

    private int ack(long n) {
        if (n <= 0) {
            return 0;
        }
        acquireForAck();
        nativeAck((int) n);
        eventsAcked.addAndGet(n);
        return (int) n;
    }

    /** {@code ibv_ack_cq_events}; with 0 it only takes and releases the CQ's event mutex. */
    private void nativeAck(int n) {
        try {
            Ibverbs.ACK_CQ_EVENTS.invokeExact(handle, n);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private void acquireForAck() {
        if (isClosed()) {
            throw closedException();
        }
    }

    /** {@code IBV_EVENT_CQ_ERR} async events seen for this CQ (overrun): the CQ is then unusable. */
    public long asyncErrors() {
        return asyncErrors.get();
    }

    void recordAsyncError() {
        asyncErrors.incrementAndGet();
    }

    // ------------------------------------------------------------------ destroy

    @Override
    final void destroy() {
        if (channel != null) {
            synchronized (channel.eventLock) {
                ackAndDestroy();
            }
            channel.unregister(this);
        } else {
            ackAndDestroy();
        }
    }

    private void ackAndDestroy() {
        ackEvents();
        if (isStandIn()) {
            destroyed();
            return;
        }
        Native.destroyVerb(Ibverbs.DESTROY_CQ, handle, "ibv_destroy_cq", describe());
        destroyed();
    }

    /** Frees Java-side resources after ibv_destroy_cq succeeded. */
    void destroyed() {
    }
}
