package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Efa;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An EFA completion queue: an {@link ExtendedCompletionQueue} created by {@code efadv_create_cq} (libefa), with the
 * EFA readers of {@code struct efadv_cq} ({@code efadv_cq_from_ibv_cq_ex}): {@code efadv_wc_read_sgid} and
 * {@code efadv_wc_is_unsolicited}.
 *
 * <p>{@code efadv_cq_init_attr} is passed in its rdma-core 44 layout (16 bytes, {@code inlen} = 16), which every
 * libefa version accepts. {@link EfaWcFlag#IS_UNSOLICITED} needs rdma-core 52+ (older libefa refuses it with
 * EOPNOTSUPP); its reader is read from {@code efadv_cq} only when the CQ was created with it. On a device that is not
 * EFA, the provider refuses every request with EOPNOTSUPP.
 *
 * <p>EFA CQs take no reference on their completion channel in libibverbs; this binding keeps the channel from being
 * destroyed while the CQ exists.
 */
public final class EfaCompletionQueue extends ExtendedCompletionQueue {

    private final long efaFlags;
    private final MemorySegment efadvCq;
    private final MemorySegment readSgid;
    private final MemorySegment readUnsolicited;
    private final Arena gidArena = Arena.ofShared();
    private final MemorySegment gid = Native.unscoped(gidArena.allocate(16, 8));

    EfaCompletionQueue(@Nullable Context context, MemorySegment cq, CqInitAttributes attributes, long efaFlags,
            MemorySegment efadvCq, boolean batchIterator, ProviderCalls calls) {
        super(context, cq, attributes, batchIterator, calls);
        this.efaFlags = efaFlags;
        this.efadvCq = efadvCq;
        this.readSgid = (efaFlags & EfaWcFlag.SGID.bit()) == 0 ? MemorySegment.NULL
                : efadvCq.get(ADDRESS, Layouts.off(Layouts.EFADV_CQ, "wc_read_sgid"));
        this.readUnsolicited = (efaFlags & EfaWcFlag.IS_UNSOLICITED.bit()) == 0 ? MemorySegment.NULL
                : efadvCq.get(ADDRESS, Layouts.EFADV_CQ_WC_IS_UNSOLICITED);
    }

    /**
     * A stand-in of the tests: memory laid out as {@code ibv_cq_ex} and {@code efadv_cq} (24 bytes) whose functions
     * are native functions of theirs, {@code destroyFn} one with ibv_destroy_cq's signature.
     */
    static EfaCompletionQueue standIn(MemorySegment fakeCq, MemorySegment fakeEfadvCq, CqInitAttributes attributes,
            Set<EfaWcFlag> efaWcFlags, MemorySegment destroyFn) {
        return new EfaCompletionQueue(null, fakeCq, attributes, EfaWcFlag.mask(efaWcFlags),
                fakeEfadvCq.reinterpret(24), true, new ProviderCalls(MemorySegment.NULL, MemorySegment.NULL,
                        destroyFn));
    }

    static EfaCompletionQueue create(Context context, CqInitAttributes attributes, Set<EfaWcFlag> efaWcFlags) {
        Rdma.requireEfa();
        checkChannel(context, attributes.channel());
        long efaMask = EfaWcFlag.mask(efaWcFlags == null ? Set.of() : efaWcFlags);
        MemorySegment cq;
        MemorySegment dv;
        context.acquire();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = fill(a, attributes);
            MemorySegment efaAttr = a.allocate(Layouts.EFADV_CQ_INIT_ATTR);
            efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "comp_mask"), 0L);
            efaAttr.set(JAVA_LONG, Layouts.off(Layouts.EFADV_CQ_INIT_ATTR, "wc_flags"), efaMask);
            MemorySegment capture = Native.allocateCapture(a);
            Libc.clearErrno();
            cq = (MemorySegment) Efa.CREATE_CQ.invokeExact(capture, context.handle, attr, efaAttr,
                    (int) Layouts.EFADV_CQ_INIT_ATTR.byteSize());
            if (Native.isNull(cq)) {
                throw new VerbsException("efadv_create_cq", Native.errno(capture),
                        describe(context, attributes) + ", efa wc_flags=" + efaWcFlags);
            }
            cq = checkIterator(cq.reinterpret(Layouts.IBV_CQ_EX.byteSize()), "efadv_create_cq");
            dv = (MemorySegment) Efa.CQ_FROM_IBV_CQ_EX.invokeExact(cq);
            if (Native.isNull(dv)) {
                int ignored = (int) Ibverbs.DESTROY_CQ.invokeExact(cq);
                throw new VerbsException("efadv_cq_from_ibv_cq_ex", 0, "returned NULL");
            }
        } catch (Throwable t) {
            throw Native.unchecked(t);
        } finally {
            context.release();
        }
        // EFA CQs do not store cq_context/channel in libibverbs' ibv_cq: the binding keeps them itself.
        return new EfaCompletionQueue(context, cq, attributes, efaMask,
                dv.reinterpret(Layouts.EFADV_CQ.byteSize() + 8), true, ProviderCalls.of(context));
    }

    static IllegalStateException notGranted(EfaWcFlag flag) {
        return new IllegalStateException("EFA completion field " + flag + " is not available: create the CQ with "
                + "efadv_create_cq and EFADV_WC_EX_WITH_" + flag);
    }

    /** The {@link EfaWcFlag} bits this CQ was created with. */
    public long efaWcFlags() {
        return efaFlags;
    }

    /** The {@code struct efadv_cq *} of this CQ. */
    public long efadvCqAddress() {
        return efadvCq.address();
    }

    @Override
    long efaFlags() {
        return efaFlags;
    }

    @Override
    @Nullable Gid sgidOfCurrent() {
        if (readSgid.address() == 0) {
            throw notGranted(EfaWcFlag.SGID);
        }
        return readSgid(gid) ? new Gid(gid.toArray(JAVA_BYTE)) : null;
    }

    private boolean readSgid(MemorySegment out) {
        try {
            return (int) Efa.FP_WC_READ_SGID.invokeExact(readSgid, efadvCq, out) == 0;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    @Override
    boolean unsolicitedOfCurrent() {
        if (readUnsolicited.address() == 0) {
            throw notGranted(EfaWcFlag.IS_UNSOLICITED);
        }
        try {
            return (boolean) Efa.FP_WC_IS_UNSOLICITED.invokeExact(readUnsolicited, efadvCq);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    @Override
    void copyEfa(MemorySegment ext, long eb) {
        if (readSgid.address() != 0) {
            boolean known = readSgid(gid);
            ext.set(JAVA_BYTE, eb + WorkCompletionBuffer.EXT_SGID_VALID, (byte) (known ? 1 : 0));
            MemorySegment.copy(gid, 0, ext, eb + WorkCompletionBuffer.EXT_SGID, 16);
        }
        if (readUnsolicited.address() != 0) {
            ext.set(JAVA_BYTE, eb + WorkCompletionBuffer.EXT_UNSOLICITED, (byte) (unsolicitedOfCurrent() ? 1 : 0));
        }
    }

    @Override
    void destroyed() {
        super.destroyed();
        gidArena.close();
    }
}
