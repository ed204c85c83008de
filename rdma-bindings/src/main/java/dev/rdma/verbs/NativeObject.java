package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import dev.rdma.verbs.ffm.Lifecycle;

/**
 * A native rdma-core object owned by Java: the common lifecycle of every class in this
 * package.
 *
 * <ul>
 * <li>{@link #close()} is idempotent and thread-safe. It closes the object's dependants
 * first (a context its CQs, channels and PDs; a PD its QPs and MRs), waits for calls in
 * flight on this object to finish, then destroys the native object.</li>
 * <li>A closed object throws {@link IllegalStateException} instead of touching freed
 * memory.</li>
 * <li>When the destroy verb fails (EBUSY: a QP still uses this CQ, a CQ still uses this
 * channel) the {@link VerbsException} is thrown and the object stays open and
 * usable.</li>
 * </ul>
 */
public abstract class NativeObject implements AutoCloseable {

	/**
	 * The in-flight count, closing state, close sequence and object count, shared with
	 * the connection manager's objects.
	 */
	private final Lifecycle lifecycle = new Lifecycle(getClass(), new Steps());

	private final List<NativeObject> dependants = new ArrayList<>();

	private final NativeObject owner;

	final MemorySegment handle;

	/**
	 * The object constructed in this thread's {@link #adopt}, once registered with its
	 * owner and counted (element 0), or null outside an adopt: a subclass constructor
	 * that throws after this one ran leaves it to be {@link #abandon()}ed.
	 */
	private static final ThreadLocal<NativeObject @Nullable []> ADOPTING = new ThreadLocal<>();

	/**
	 * Tests only: runs in {@link #adopt} between the create verb and the wrapper's
	 * construction (a close of the owner racing the create, made deterministic); null
	 * otherwise.
	 */
	static volatile @Nullable Runnable beforeAdoptForTests;

	NativeObject(MemorySegment handle, NativeObject owner) {
		this.handle = handle;
		this.owner = owner;
		if (owner != null) {
			owner.addDependant(this);
		}
		lifecycle.opened();
		NativeObject[] adopting = ADOPTING.get();
		if (adopting != null && adopting[0] == null) {
			adopting[0] = this;
		}
	}

	/** The native address of the object, e.g. the {@code struct ibv_cq *}. */
	public final long address() {
		return handle.address();
	}

	/** True once {@link #close()} has destroyed the native object. */
	public final boolean isClosed() {
		return lifecycle.isClosed();
	}

	/**
	 * Marks the start of a call that touches native memory; throws when closed or
	 * closing.
	 */
	final void acquire() {
		if (!lifecycle.tryAcquire()) {
			throw closedException();
		}
	}

	final void release() {
		lifecycle.release();
	}

	/**
	 * Throws {@link IllegalStateException} when closed; for calls that need no in-flight
	 * accounting.
	 */
	final void ensureOpen() {
		if (lifecycle.closing()) {
			throw closedException();
		}
	}

	IllegalStateException closedException() {
		return new IllegalStateException(describe() + " is closed");
	}

	/** A short description for messages, e.g. {@code CompletionQueue[cqe=31]}. */
	String describe() {
		return getClass().getSimpleName() + "@0x" + Long.toHexString(handle.address());
	}

	@Override
	public String toString() {
		return describe() + (isClosed() ? " (closed)" : "");
	}

	private void addDependant(NativeObject dependant) {
		synchronized (dependants) {
			ensureOpen();
			dependants.add(dependant);
		}
	}

	private void removeDependant(NativeObject dependant) {
		synchronized (dependants) {
			dependants.remove(dependant);
		}
	}

	/** Open dependants of the given type, oldest first. */
	final <T extends NativeObject> List<T> dependants(Class<T> type) {
		List<T> out = new ArrayList<>();
		synchronized (dependants) {
			for (NativeObject d : dependants) {
				if (type.isInstance(d)) {
					out.add(type.cast(d));
				}
			}
		}
		return out;
	}

	/**
	 * Open objects of the given type anywhere below this one: its dependants, theirs (the
	 * QPs of a parent domain under a PD), and so on; each owner's oldest first, an
	 * owner's own before those of its dependants.
	 */
	final <T extends NativeObject> List<T> allDependants(Class<T> type) {
		List<T> out = new ArrayList<>();
		collect(type, out);
		return out;
	}

	private <T extends NativeObject> void collect(Class<T> type, List<T> out) {
		List<NativeObject> snapshot;
		synchronized (dependants) {
			snapshot = new ArrayList<>(dependants);
		}
		for (NativeObject d : snapshot) {
			if (type.isInstance(d)) {
				out.add(type.cast(d));
			}
		}
		for (NativeObject d : snapshot) {
			d.collect(type, out);
		}
	}

	/**
	 * Closes, type by type in {@code order}, every open object of that type anywhere
	 * below this one ({@link #allDependants}), newest first: the teardown order rdma-core
	 * requires across owners (every QP, wherever its PD sits, before any CQ).
	 */
	@SafeVarargs
	final void closeAllDependants(Class<? extends NativeObject>... order) {
		for (Class<? extends NativeObject> type : order) {
			for (NativeObject o : allDependants(type).reversed()) {
				o.close();
			}
		}
	}

	/**
	 * Closes the dependants, newest first. Subclasses with a stricter teardown order
	 * override this.
	 */
	void closeDependants() {
		List<NativeObject> snapshot;
		synchronized (dependants) {
			snapshot = new ArrayList<>(dependants);
		}
		for (int i = snapshot.size() - 1; i >= 0; i--) {
			snapshot.get(i).close();
		}
	}

	/**
	 * Wraps a native object the verb just created: when the wrapper cannot be built (its
	 * owner started closing meanwhile, so it refuses new dependants; or the subclass's
	 * constructor failed after this class's registered it, e.g. an {@code eventfd} the
	 * process has no descriptor left for), forgets the half-built wrapper (its owner and
	 * every object it registered with drop it, {@link #abandoned()}) and destroys the
	 * native object before rethrowing, so that nothing created before a failure outlives
	 * it and no owner's close later meets a half-built dependant.
	 */
	static <T extends NativeObject> T adopt(java.util.function.Supplier<T> wrapper, Runnable destroyNative) {
		Runnable hook = beforeAdoptForTests;
		if (hook != null) {
			hook.run();
		}
		NativeObject[] outer = ADOPTING.get();
		NativeObject[] adopting = new NativeObject[1];
		ADOPTING.set(adopting);
		try {
			return wrapper.get();
		}
		catch (RuntimeException | Error e) {
			try {
				if (adopting[0] != null) {
					adopting[0].abandon();
				}
				destroyNative.run();
			}
			catch (RuntimeException suppressed) {
				e.addSuppressed(suppressed);
			}
			throw e;
		}
		finally {
			if (outer == null) {
				ADOPTING.remove();
			}
			else {
				ADOPTING.set(outer);
			}
		}
	}

	/**
	 * Forgets an object whose construction failed after this class's constructor: counted
	 * closed without a destroy (its creator destroys the native object), dropped by its
	 * owner and by whatever {@link #abandoned()} names.
	 */
	private void abandon() {
		lifecycle.abandoned();
		if (owner != null) {
			owner.removeDependant(this);
		}
		abandoned();
	}

	/**
	 * Undoes what a subclass's constructor registered elsewhere (a CQ with its channel, a
	 * QP with its CQs), for an object whose construction failed after it: each step only
	 * if it was done (fields not yet assigned are null).
	 */
	void abandoned() {
	}

	/**
	 * Runs {@code create} - a create verb that uses {@code first} and {@code second}
	 * (either may be null), and the construction of the object it creates - while both
	 * are held open, as {@code QueuePair.create} holds its PD and CQs: a {@code close()}
	 * of either on another thread either came first (then this throws
	 * {@link IllegalStateException} "closed" before {@code create} runs) or waits for
	 * {@code create} to return, and never destroys the object while the verb uses it.
	 * @throws IllegalStateException when {@code first} or {@code second} is closed or
	 * closing
	 */
	static <T> T holdingOpen(@Nullable NativeObject first, @Nullable NativeObject second,
			java.util.function.Supplier<T> create) {
		if (first != null) {
			first.acquire();
		}
		try {
			if (second != null) {
				second.acquire();
			}
			try {
				return create.get();
			}
			finally {
				if (second != null) {
					second.release();
				}
			}
		}
		finally {
			if (first != null) {
				first.release();
			}
		}
	}

	/**
	 * Calls a destroy-style verb {@code int verb(void *object)} that returns 0 or a
	 * positive errno value, and throws {@link VerbsException} naming {@code verb} and
	 * {@code what} when it fails.
	 */
	static void destroyVerb(java.lang.invoke.MethodHandle handle, MemorySegment object, String verb, String what) {
		int rc = dev.rdma.verbs.ffm.Native.callIntVerb(handle, object);
		if (rc != 0) {
			throw new VerbsException(verb, rc, what);
		}
	}

	/**
	 * Puts {@code fd} into non-blocking mode, or throws {@link VerbsException} naming
	 * {@code what}.
	 */
	static void setNonBlocking(int fd, String what) {
		int errno = dev.rdma.verbs.ffm.Libc.setNonBlocking(fd);
		if (errno != 0) {
			throw new VerbsException("fcntl(F_SETFL, O_NONBLOCK)", errno, what);
		}
	}

	/**
	 * Destroys the native object; throws {@link VerbsException} (object stays usable)
	 * when the verb refuses.
	 */
	abstract void destroy();

	/**
	 * Called with the close lock held, before waiting for in-flight calls: lets a waiter
	 * be woken up.
	 */
	void beforeClose() {
	}

	/**
	 * True when no call outside the {@link #acquire()} accounting is in flight (see
	 * CompletionQueue's poll path).
	 */
	boolean idle() {
		return true;
	}

	/**
	 * True once close() has started (or finished); a cheap read for paths that do their
	 * own in-flight accounting.
	 */
	final boolean closing() {
		return lifecycle.closing();
	}

	/**
	 * Destroys the native object after its dependants. Idempotent and thread-safe. Waits
	 * (at most 10 s) for calls in flight on other threads, e.g. a poll, to return.
	 * Calling it from inside such a call on the same object (a poll callback closing its
	 * own CQ) throws {@link IllegalStateException}.
	 * @throws VerbsException when the destroy verb fails; the object then stays open
	 */
	@Override
	public final void close() {
		lifecycle.close();
	}

	/**
	 * Throws when closing now is refused because of what the calling thread is doing (a
	 * {@link QueuePair} inside an iterator batch of one of its CQs), before the close
	 * lock is taken: such a close fails at once and never waits for another thread's
	 * close of the same object, which may itself wait for this thread (on mlx5 another
	 * thread's {@code ibv_destroy_qp} spins on the CQ lock that this thread's batch
	 * holds). By default: the check of every open QP below this object (a PD's, a
	 * context's), which this close would close first; a QP checks its own CQs.
	 */
	void checkCloseAllowedOnThisThread() {
		for (QueuePair qp : allDependants(QueuePair.class)) {
			qp.checkCloseAllowedOnThisThread();
		}
	}

	/**
	 * Throws when closing now is refused, before anything changes: a programming error
	 * (e.g. from inside this object's own poll callback) or a refusal the binding can
	 * foresee (EBUSY: the object is still in use).
	 */
	void checkCloseAllowed() {
	}

	/**
	 * Called after a close that failed half way (a destroy verb refused, a wait timed
	 * out) has reopened the object: undoes what {@link #beforeClose()} did, so the object
	 * is exactly as usable as before, waits included.
	 */
	void closeRefused() {
	}

	/** The lifecycle's steps: this object's package-private hooks. */
	private final class Steps implements Lifecycle.Steps {

		@Override
		public String describe() {
			return NativeObject.this.describe();
		}

		@Override
		public void checkCloseAllowedOnThisThread() {
			NativeObject.this.checkCloseAllowedOnThisThread();
		}

		@Override
		public void beforeClosing() {
			checkCloseAllowed();
		}

		@Override
		public void closeDependants() {
			NativeObject.this.closeDependants();
		}

		@Override
		public void beforeClose() {
			NativeObject.this.beforeClose();
		}

		@Override
		public boolean idle() {
			return NativeObject.this.idle();
		}

		@Override
		public void destroy() {
			NativeObject.this.destroy();
		}

		@Override
		public void closeRefused() {
			NativeObject.this.closeRefused();
		}

		@Override
		public void afterClose() {
			if (owner != null) {
				owner.removeDependant(NativeObject.this);
			}
		}

	}

}
