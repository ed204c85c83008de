package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;

import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A registered memory region ({@code struct ibv_mr *}, {@code ibv_reg_mr} /
 * {@code ibv_dereg_mr}) over native memory that the binding allocated and frees on
 * {@link #close()}. {@link #buffer()} is the memory; do not use it after close. (An I/O
 * operation of another thread still using it when the MR closes, e.g. a channel read into
 * {@code buffer().asByteBuffer()}, delays the free of the memory until a later MR close
 * after that operation: the close itself never fails for it.)
 */
public final class MemoryRegion extends NativeObject {

	/** {@code enum ibv_access_flags}. */
	public enum Access {

		LOCAL_WRITE(1), REMOTE_WRITE(1 << 1), REMOTE_READ(1 << 2), REMOTE_ATOMIC(1 << 3);

		final int bit;

		Access(int bit) {
			this.bit = bit;
		}

	}

	private final Arena arena;

	private final MemorySegment buffer;

	private final int lkey;

	private final int rkey;

	private MemoryRegion(ProtectionDomain pd, MemorySegment mr, Arena arena, MemorySegment buffer) {
		super(mr, pd);
		this.arena = arena;
		this.buffer = buffer;
		this.lkey = mr.get(JAVA_INT, Layouts.off(Layouts.IBV_MR, "lkey"));
		this.rkey = mr.get(JAVA_INT, Layouts.off(Layouts.IBV_MR, "rkey"));
	}

	static MemoryRegion register(ProtectionDomain pd, long size, Set<Access> access) {
		if (size <= 0) {
			throw new IllegalArgumentException("memory region size must be > 0, got " + size);
		}
		int flags = 0;
		for (Access a : access) {
			flags |= a.bit;
		}
		Arena arena = Arena.ofShared();
		pd.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment buffer = arena.allocate(size, 4096);
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment mr = (MemorySegment) Ibverbs.REG_MR.invokeExact(capture, pd.handle, buffer, size, flags);
			if (Native.isNull(mr)) {
				int errno = Native.errno(capture);
				String detail = size + " bytes, access " + access;
				throw new VerbsException("ibv_reg_mr", errno, errno == Errno.ENOMEM
						? detail + "; " + LockedMemory.explainEnomem("ibv_reg_mr", size) : detail);
			}
			MemoryRegion region = adopt(
					() -> new MemoryRegion(pd, mr.reinterpret(Layouts.IBV_MR.byteSize()), arena, buffer),
					() -> Native.callIntVerb(Ibverbs.DEREG_MR, mr));
			LockedMemory.added(size);
			return region;
		}
		catch (Throwable t) {
			arena.close();
			if (t instanceof RuntimeException r) {
				throw r;
			}
			throw new IllegalStateException(t);
		}
		finally {
			pd.release();
		}
	}

	/** The registered memory. */
	public MemorySegment buffer() {
		ensureOpen();
		return buffer;
	}

	public int lkey() {
		return lkey;
	}

	public int rkey() {
		return rkey;
	}

	/** The address of the first byte (for remote_addr of RDMA operations). */
	public long bufferAddress() {
		return buffer.address();
	}

	/**
	 * {@code ibv_dereg_mr}, then the memory is freed. Once the MR is deregistered this
	 * never fails: a close that threw here would reopen an object whose native MR is
	 * gone, and its next close would deregister it twice. An I/O operation of another
	 * thread that holds the memory (a channel read into {@code buffer().asByteBuffer()})
	 * keeps the arena from closing; its memory is then freed by a later MR close, once
	 * that operation has ended.
	 */
	@Override
	void destroy() {
		destroyVerb(Ibverbs.DEREG_MR, handle, "ibv_dereg_mr", describe());
		LockedMemory.removed(buffer.byteSize());
		closeArena(arena);
	}

	/**
	 * Arenas whose close an I/O operation in progress refused: retried at later closes.
	 */
	private static final ConcurrentLinkedQueue<Arena> DEFERRED_ARENAS = new ConcurrentLinkedQueue<>();

	private static void closeArena(Arena arena) {
		for (int n = DEFERRED_ARENAS.size(); n > 0; n--) {
			Arena deferred = DEFERRED_ARENAS.poll();
			if (deferred == null) {
				break;
			}
			tryClose(deferred);
		}
		tryClose(arena);
	}

	private static void tryClose(Arena arena) {
		try {
			arena.close();
		}
		catch (IllegalStateException inUse) {
			DEFERRED_ARENAS.add(arena);
		}
	}

	/** How many closed MRs' memory still waits for an I/O operation to end (tests). */
	static int deferredArenas() {
		return DEFERRED_ARENAS.size();
	}

}
