package dev.rdma.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;

/**
 * A protection domain ({@code struct ibv_pd *}, {@code ibv_alloc_pd} / {@code ibv_dealloc_pd}). Registers memory and
 * creates queue pairs; {@link #close()} closes its QPs, then its MRs. Thread-safe.
 */
public final class ProtectionDomain extends NativeObject {

    private final Context context;

    private ProtectionDomain(Context context, MemorySegment pd) {
        super(pd, context);
        this.context = context;
    }

    static ProtectionDomain allocate(Context context) {
        context.acquire();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = Native.allocateCapture(a);
            MemorySegment pd = (MemorySegment) Ibverbs.ALLOC_PD.invokeExact(capture, context.handle);
            if (Native.isNull(pd)) {
                throw new VerbsException("ibv_alloc_pd", Native.errno(capture), context.deviceName());
            }
            return new ProtectionDomain(context, pd);
        } catch (RdmaException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            context.release();
        }
    }

    public Context context() {
        return context;
    }

    /** Always false: this binding allocates plain PDs only ({@code ibv_alloc_parent_domain} is not bound). */
    public boolean isParentDomain() {
        return false;
    }

    /**
     * {@code ibv_reg_mr} over {@code size} bytes of fresh native memory (page-aligned, zeroed), freed when the MR is
     * closed.
     */
    public MemoryRegion registerMemory(long size, Set<MemoryRegion.Access> access) {
        return MemoryRegion.register(this, size, access);
    }

    /** {@code ibv_create_qp} of a reliable-connected QP. */
    public QueuePair createQueuePair(QueuePair.Attributes attributes) {
        return QueuePair.create(this, attributes);
    }

    /** The open QPs of this PD, oldest first. */
    public List<QueuePair> queuePairs() {
        return dependants(QueuePair.class);
    }

    @Override
    void closeDependants() {
        for (QueuePair qp : queuePairs().reversed()) {
            qp.close();
        }
        super.closeDependants();
    }

    @Override
    String describe() {
        return "ProtectionDomain[" + context.deviceName() + "]";
    }

    @Override
    void destroy() {
        try {
            int rc = (int) Ibverbs.DEALLOC_PD.invokeExact(handle);
            if (rc != 0) {
                throw new VerbsException("ibv_dealloc_pd", rc, describe());
            }
        } catch (RdmaException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
