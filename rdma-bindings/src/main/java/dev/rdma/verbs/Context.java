package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An open device context ({@code struct ibv_context *}, {@code ibv_open_device} /
 * {@code ibv_close_device}).
 *
 * <p>
 * Creates the completion channels, CQs and protection domains of the device.
 * {@link #close()} closes them all first, in the order rdma-core requires (QPs, CQs,
 * channels, MRs and PDs, then the context). Thread-safe.
 */
public final class Context extends NativeObject {

	private final String deviceName;

	private final long guid;

	private final int numCompVectors;

	private final int asyncFd;

	private final Waker asyncWaker;

	private final Object asyncLock = new Object();

	/**
	 * {@link #getAsyncEvent}'s memory, used under {@link #asyncLock}: the event,
	 * pollfd[2] and a capture segment, so that the monitor's idle waits allocate nothing;
	 * freed by the garbage collector with this object.
	 */
	private final MemorySegment asyncEvent;

	private final MemorySegment asyncFds;

	private final MemorySegment asyncCapture;

	private volatile DeviceAttributes attributes;

	private Context(MemorySegment ctx, String deviceName, long guid, Waker asyncWaker) {
		super(ctx, null);
		this.asyncWaker = asyncWaker;
		this.deviceName = deviceName;
		this.guid = guid;
		this.numCompVectors = ctx.get(JAVA_INT, Layouts.CONTEXT_NUM_COMP_VECTORS);
		this.asyncFd = ctx.get(JAVA_INT, Layouts.CONTEXT_ASYNC_FD);
		Arena scratch = Arena.ofAuto();
		this.asyncEvent = scratch.allocate(Layouts.IBV_ASYNC_EVENT);
		this.asyncFds = scratch.allocate(Layouts.POLLFD, 2);
		this.asyncCapture = Native.allocateCapture(scratch);
	}

	static Context open(Device device, MemorySegment dev) {
		// the async waker's eventfd first: when it cannot be created, nothing native is
		// open yet (created after ibv_open_device, its failure leaked the context)
		Waker waker = new Waker();
		MemorySegment ctx;
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			ctx = (MemorySegment) Ibverbs.OPEN_DEVICE.invokeExact(capture, dev);
			if (Native.isNull(ctx)) {
				int errno = Native.errno(capture);
				throw new VerbsException("ibv_open_device", errno,
						DeviceFiles.detail(errno, DeviceFiles.uverbs(device.name()), device.name()));
			}
		}
		catch (Throwable t) {
			waker.close();
			throw Native.unchecked(t);
		}
		MemorySegment opened = ctx.reinterpret(Layouts.IBV_CONTEXT.byteSize());
		Context context = adopt(() -> new Context(opened, device.name(), device.guid(), waker), () -> {
			try {
				closeDevice(opened, device.name());
			}
			finally {
				waker.close();
			}
		});
		try {
			setNonBlocking(context.asyncFd, "async_fd of " + device.name());
		}
		catch (RuntimeException e) {
			context.close();
			throw e;
		}
		return context;
	}

	/**
	 * Opens the device called {@code name}, or the first device listed when {@code name}
	 * is null.
	 * @throws java.util.NoSuchElementException when there is no such device (or no device
	 * at all)
	 */
	public static Context open(String name) {
		try (DeviceList list = DeviceList.open()) {
			Device device = name == null
					? list.devices()
						.stream()
						.findFirst()
						.orElseThrow(() -> new java.util.NoSuchElementException("no RDMA device found"))
					: list.byName(name)
						.orElseThrow(() -> new java.util.NoSuchElementException("no RDMA device named " + name
								+ "; devices: " + list.devices().stream().map(Device::name).toList()));
			return device.open();
		}
	}

	public String deviceName() {
		return deviceName;
	}

	/** Node GUID, host order. */
	public long guid() {
		return guid;
	}

	/** {@code context->num_comp_vectors}: valid comp_vector values are 0 .. this - 1. */
	public int numCompVectors() {
		return numCompVectors;
	}

	@Override
	String describe() {
		return "Context[" + deviceName + "]";
	}

	/**
	 * {@code ibv_query_device_ex} (a static inline of verbs.h): the device's limits,
	 * identity, capability flags, completion timestamp mask and core clock. Through
	 * {@code verbs_context.query_device_ex} when the provider has it; when it has none,
	 * or it answers {@code EOPNOTSUPP} or {@code ENOSYS}, through
	 * {@code ibv_query_device}, and then every extended member is 0. Queried once per
	 * context and cached (device attributes do not change while it is open). Thread-safe.
	 * @throws VerbsException naming {@code ibv_query_device_ex} (or
	 * {@code ibv_query_device} when the fallback failed), the errno the verb returned and
	 * the device
	 * @throws IllegalStateException when this context is closed
	 */
	public DeviceAttributes queryDevice() {
		DeviceAttributes a = attributes;
		if (a != null) {
			ensureOpen();
			return a;
		}
		acquire();
		try {
			a = DeviceQueries.queryDeviceEx(handle, deviceName, Ibverbs.QUERY_DEVICE);
			attributes = a;
			return a;
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_query_port}: the inline verb of verbs.h, through
	 * {@code verbs_context.query_port} when the provider has it, else the exported
	 * compatibility entry point.
	 */
	public PortAttributes queryPort(int port) {
		DeviceQueries.checkPort(port);
		acquire();
		try {
			return DeviceQueries.queryPort(handle, deviceName, port);
		}
		finally {
			release();
		}
	}

	/** {@code ibv_query_gid}. */
	public Gid queryGid(int port, int index) {
		DeviceQueries.checkGidIndex(port, index);
		acquire();
		try {
			return DeviceQueries.queryGid(handle, deviceName, port, index);
		}
		finally {
			release();
		}
	}

	/**
	 * {@code ibv_query_gid_ex(ctx, port, index, &entry, 0)}: the GID at {@code index}
	 * with its type and netdev.
	 * @throws VerbsException on an empty or absent entry (ENODATA, EINVAL)
	 */
	public GidEntry queryGidEntry(int port, int index) {
		DeviceQueries.checkGidIndex(port, index);
		acquire();
		try {
			return DeviceQueries.queryGidEntry(handle, deviceName, port, index);
		}
		finally {
			release();
		}
	}

	/** The index of the first IPv4-mapped (RoCE v2) GID of {@code port}, or -1. */
	public int findIpv4GidIndex(int port) {
		int len = queryPort(port).gidTableLength();
		for (int i = 0; i < len; i++) {
			try {
				Gid g = queryGid(port, i);
				if (!g.isZero() && g.isIpv4Mapped()) {
					return i;
				}
			}
			catch (VerbsException e) {
				// an unpopulated entry: keep looking
			}
		}
		return -1;
	}

	/**
	 * The function pointer of a {@code struct verbs_context} member, as
	 * {@code verbs_get_ctx_op} reads it: NULL when the context is not a verbs_context,
	 * when the provider's verbs_context is too small to have the member, or when the
	 * member is unset.
	 */
	MemorySegment verbsOp(long relativeOffset) {
		return DeviceQueries.verbsOp(handle, relativeOffset);
	}

	// ------------------------------------------------------------------ factories

	/**
	 * {@code ibv_create_comp_channel}, in {@link CompletionChannel.WaitMode#POLL} (its fd
	 * non-blocking).
	 */
	public CompletionChannel createCompletionChannel() {
		return CompletionChannel.create(this, CompletionChannel.WaitMode.POLL);
	}

	/**
	 * {@code ibv_create_comp_channel} with the given wait mode.
	 * @throws UnsupportedOperationException for
	 * {@link CompletionChannel.WaitMode#BLOCKING_READ} when the JDK's I/O interrupt
	 * signal has no suitable handler (nothing is created then)
	 */
	public CompletionChannel createCompletionChannel(CompletionChannel.WaitMode waitMode) {
		return CompletionChannel.create(this, waitMode);
	}

	/**
	 * {@code ibv_create_cq(context, cqe, cq_context, channel, comp_vector)}: a legacy CQ
	 * polled with {@code ibv_poll_cq}.
	 * @param cqe the minimum number of entries; the provider may round up (see
	 * {@link CompletionQueue#cqe()})
	 * @param channel completion channel for events, or null for a CQ that is only
	 * busy-polled
	 * @param compVector completion vector, 0 .. {@link #numCompVectors()} - 1
	 */
	public CompletionQueue createCompletionQueue(int cqe, @Nullable CompletionChannel channel, int compVector) {
		return CompletionQueue.create(this, cqe, channel, compVector);
	}

	/**
	 * {@code ibv_create_cq_ex}: an extended CQ polled with the start/next/end iterator.
	 */
	public ExtendedCompletionQueue createExtendedCompletionQueue(CqInitAttributes attributes) {
		return ExtendedCompletionQueue.create(this, attributes);
	}

	/** {@code ibv_alloc_pd}. */
	public ProtectionDomain allocateProtectionDomain() {
		return ProtectionDomain.allocate(this);
	}

	/** The open CQs of this context (of every kind), oldest first. */
	public List<CompletionQueue> completionQueues() {
		return dependants(CompletionQueue.class);
	}

	/** The open completion channels of this context, oldest first. */
	public List<CompletionChannel> completionChannels() {
		return dependants(CompletionChannel.class);
	}

	// ------------------------------------------------------------------ async events

	/**
	 * Waits up to {@code timeout} for the next asynchronous event
	 * ({@code ibv_get_async_event} on the non-blocking {@code async_fd} with
	 * {@code poll(2)}), copies it and acknowledges it ({@code ibv_ack_async_event})
	 * before returning it, so that no destroy ever waits on it. A
	 * {@link AsyncEventType#CQ_ERR} is also recorded on the CQ
	 * ({@link CompletionQueue#asyncErrors()}), an
	 * {@link AsyncEventType#SRQ_LIMIT_REACHED} or {@link AsyncEventType#SRQ_ERR} on the
	 * shared receive queue ({@link SharedReceiveQueue#limitEvents()}).
	 *
	 * <p>
	 * One thread at a time waits (others block). {@link #wakeAsyncWaiter()} or
	 * {@link #close()} make it return early.
	 * @return the event, or null on timeout or wake-up
	 */
	public @Nullable AsyncEvent getAsyncEvent(Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		synchronized (asyncLock) {
			acquire();
			try {
				MemorySegment capture = asyncCapture;
				MemorySegment fds = asyncFds;
				MemorySegment event = asyncEvent;
				while (true) {
					int rc = (int) Ibverbs.GET_ASYNC_EVENT.invokeExact(capture, handle, event);
					if (rc == 0) {
						return ackAndCopy(event);
					}
					int errno = Native.errno(capture);
					if (errno != Errno.EAGAIN && errno != Errno.EINTR) {
						throw new VerbsException("ibv_get_async_event", errno, deviceName);
					}
					long left = deadline - System.nanoTime();
					if (left <= 0) {
						return null;
					}
					Libc.pollfd(fds, 0, asyncFd);
					Libc.pollfd(fds, 1, asyncWaker.fd());
					int n = Libc.poll(fds, 2, (int) Math.max(1, Math.min(Integer.MAX_VALUE, left / 1_000_000)),
							capture);
					if (n < 0 && n != -Errno.EINTR) {
						throw new VerbsException("poll(async_fd)", -n, deviceName);
					}
					if (n > 0 && Libc.readable(fds, 1)) {
						asyncWaker.clear();
						return null;
					}
				}
			}
			catch (Throwable t) {
				throw Native.unchecked(t);
			}
			finally {
				release();
			}
		}
	}

	/** Makes a thread blocked in {@link #getAsyncEvent} return null now. */
	public void wakeAsyncWaiter() {
		asyncWaker.wake();
	}

	private AsyncEvent ackAndCopy(MemorySegment event) throws Throwable {
		var l = Layouts.IBV_ASYNC_EVENT;
		int code = event.get(JAVA_INT, Layouts.off(l, "event_type"));
		AsyncEventType type = AsyncEventType.of(code);
		long element = type.element() == AsyncEventType.Element.PORT || type.element() == AsyncEventType.Element.DEVICE
				? 0 : event.get(JAVA_LONG, 0);
		int port = type.element() == AsyncEventType.Element.PORT ? event.get(JAVA_INT, 0) : 0;
		Ibverbs.ACK_ASYNC_EVENT.invokeExact(event);
		String text = Native.string((MemorySegment) Ibverbs.EVENT_TYPE_STR.invokeExact(code));
		CompletionQueue cq = null;
		QueuePair qp = null;
		if (type == AsyncEventType.CQ_ERR) {
			for (CompletionQueue c : completionQueues()) {
				if (c.address() == element) {
					cq = c;
					c.recordAsyncError();
				}
			}
		}
		else if (type.element() == AsyncEventType.Element.QP) {
			for (QueuePair q : allDependants(QueuePair.class)) {
				if (q.address() == element) {
					qp = q;
				}
			}
		}
		SharedReceiveQueue srq = null;
		if (type.element() == AsyncEventType.Element.SRQ) {
			for (SharedReceiveQueue s : allDependants(SharedReceiveQueue.class)) {
				if (s.address() == element) {
					srq = s;
					s.recordEvent(type);
				}
			}
		}
		return new AsyncEvent(type, code, text, cq, qp, element, port, srq);
	}

	// ------------------------------------------------------------------ lifecycle

	/**
	 * Every QP first, also those of parent domains (a dependant of their PD, not of this
	 * context), then the CQs they used, then the channels, then the rest (PDs with their
	 * MRs and address handles).
	 */
	@Override
	void closeDependants() {
		closeAllDependants(QueuePair.class, CompletionQueue.class, CompletionChannel.class);
		super.closeDependants();
	}

	@Override
	void beforeClose() {
		asyncWaker.wake();
	}

	/**
	 * A refused close (ibv_close_device failed) leaves no wake-up pending for the next
	 * getAsyncEvent.
	 */
	@Override
	void closeRefused() {
		asyncWaker.clear();
	}

	@Override
	void destroy() {
		closeDevice(handle, deviceName);
		asyncWaker.close();
	}

	/** {@code ibv_close_device}, or {@link VerbsException} naming it. */
	private static void closeDevice(MemorySegment ctx, String deviceName) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			int rc = (int) Ibverbs.CLOSE_DEVICE.invokeExact(capture, ctx);
			if (rc != 0) {
				throw new VerbsException("ibv_close_device", rc < 0 ? Native.errno(capture) : rc, deviceName);
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

}
