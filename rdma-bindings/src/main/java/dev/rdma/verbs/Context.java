package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.time.Duration;
import java.util.List;
import java.util.Set;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

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

	private volatile DeviceAttributes attributes;

	private Context(MemorySegment ctx, String deviceName, long guid, Waker asyncWaker) {
		super(ctx, null);
		this.asyncWaker = asyncWaker;
		this.deviceName = deviceName;
		this.guid = guid;
		this.numCompVectors = ctx.get(JAVA_INT, Layouts.CONTEXT_NUM_COMP_VECTORS);
		this.asyncFd = ctx.get(JAVA_INT, Layouts.CONTEXT_ASYNC_FD);
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
				throw new VerbsException("ibv_open_device", Native.errno(capture), device.name());
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
			a = queryDeviceEx(handle, deviceName, Ibverbs.QUERY_DEVICE);
			attributes = a;
			return a;
		}
		finally {
			release();
		}
	}

	/**
	 * The logic of the {@code ibv_query_device_ex} inline on {@code ctx}, with an input
	 * of comp_mask 0 and {@code attr_size} = the size of
	 * {@link Layouts#IBV_DEVICE_ATTR_EX}. {@code legacyQueryDevice} is
	 * {@code int ibv_query_device(struct ibv_context *, struct ibv_device_attr *)} (a
	 * parameter so that the tests can stand in for it).
	 */
	static DeviceAttributes queryDeviceEx(MemorySegment ctx, String deviceName, MethodHandle legacyQueryDevice) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment input = arena.allocate(Layouts.IBV_QUERY_DEVICE_EX_INPUT); // comp_mask
																						// 0
			MemorySegment attr = arena.allocate(Layouts.IBV_DEVICE_ATTR_EX);
			MemorySegment fn = verbsOp(ctx, Layouts.VCTX_QUERY_DEVICE_EX);
			String verb = "ibv_query_device_ex";
			int rc = Native.isNull(fn) ? Errno.EOPNOTSUPP : (int) Ibverbs.FP_QUERY_DEVICE_EX.invokeExact(fn, ctx, input,
					attr, Layouts.IBV_DEVICE_ATTR_EX.byteSize());
			if (rc == Errno.EOPNOTSUPP || rc == Errno.ENOSYS) {
				verb = "ibv_query_device";
				attr.fill((byte) 0);
				MemorySegment orig = attr.asSlice(Layouts.off(Layouts.IBV_DEVICE_ATTR_EX, "orig_attr"),
						Layouts.IBV_DEVICE_ATTR);
				rc = (int) legacyQueryDevice.invokeExact(ctx, orig);
			}
			if (rc != 0) {
				throw new VerbsException(verb, rc, deviceName);
			}
			return decodeDeviceAttributes(attr);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/**
	 * The record of a {@code struct ibv_device_attr_ex}
	 * ({@link Layouts#IBV_DEVICE_ATTR_EX}) filled by the verb.
	 */
	static DeviceAttributes decodeDeviceAttributes(MemorySegment attr) {
		var ex = Layouts.IBV_DEVICE_ATTR_EX;
		var l = Layouts.IBV_DEVICE_ATTR;
		MemorySegment orig = attr.asSlice(Layouts.off(ex, "orig_attr"), l);
		return new DeviceAttributes(orig.asSlice(Layouts.off(l, "fw_ver"), 64).getString(0),
				Long.reverseBytes(orig.get(JAVA_LONG, Layouts.off(l, "node_guid"))),
				Long.reverseBytes(orig.get(JAVA_LONG, Layouts.off(l, "sys_image_guid"))),
				orig.get(JAVA_LONG, Layouts.off(l, "max_mr_size")), orig.get(JAVA_INT, Layouts.off(l, "vendor_id")),
				orig.get(JAVA_INT, Layouts.off(l, "vendor_part_id")), orig.get(JAVA_INT, Layouts.off(l, "hw_ver")),
				orig.get(JAVA_INT, Layouts.off(l, "max_qp")), orig.get(JAVA_INT, Layouts.off(l, "max_qp_wr")),
				orig.get(JAVA_INT, Layouts.off(l, "device_cap_flags")), orig.get(JAVA_INT, Layouts.off(l, "max_sge")),
				orig.get(JAVA_INT, Layouts.off(l, "max_cq")), orig.get(JAVA_INT, Layouts.off(l, "max_cqe")),
				orig.get(JAVA_INT, Layouts.off(l, "max_mr")), orig.get(JAVA_INT, Layouts.off(l, "max_pd")),
				orig.get(JAVA_INT, Layouts.off(l, "max_srq")),
				orig.get(JAVA_BYTE, Layouts.off(l, "phys_port_cnt")) & 0xff,
				attr.get(JAVA_LONG, Layouts.off(ex, "completion_timestamp_mask")),
				attr.get(JAVA_LONG, Layouts.off(ex, "hca_core_clock")),
				attr.get(JAVA_LONG, Layouts.off(ex, "device_cap_flags_ex")),
				orig.get(JAVA_INT, Layouts.off(l, "max_qp_rd_atom")),
				orig.get(JAVA_INT, Layouts.off(l, "max_qp_init_rd_atom")));
	}

	/**
	 * {@code ibv_query_port}: the inline verb of verbs.h, through
	 * {@code verbs_context.query_port} when the provider has it, else the exported
	 * compatibility entry point.
	 */
	public PortAttributes queryPort(int port) {
		checkPort(port);
		acquire();
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment attr = arena.allocate(Layouts.IBV_PORT_ATTR);
			MemorySegment fn = verbsOp(Layouts.VCTX_QUERY_PORT);
			int rc = Native.isNull(fn) ? (int) Ibverbs.QUERY_PORT_COMPAT.invokeExact(handle, (byte) port, attr)
					: (int) Ibverbs.FP_QUERY_PORT.invokeExact(fn, handle, (byte) port, attr,
							Layouts.IBV_PORT_ATTR.byteSize());
			if (rc != 0) {
				throw new VerbsException("ibv_query_port", rc, deviceName + " port " + port);
			}
			var l = Layouts.IBV_PORT_ATTR;
			return new PortAttributes(PortAttributes.PortState.of(attr.get(JAVA_INT, Layouts.off(l, "state"))),
					PortAttributes.mtuBytes(attr.get(JAVA_INT, Layouts.off(l, "max_mtu"))),
					PortAttributes.mtuBytes(attr.get(JAVA_INT, Layouts.off(l, "active_mtu"))),
					attr.get(JAVA_INT, Layouts.off(l, "gid_tbl_len")),
					attr.get(JAVA_SHORT, Layouts.off(l, "lid")) & 0xffff,
					PortAttributes.LinkLayer.of(attr.get(JAVA_BYTE, Layouts.off(l, "link_layer"))),
					attr.get(JAVA_BYTE, Layouts.off(l, "active_width")) & 0xff,
					attr.get(JAVA_BYTE, Layouts.off(l, "active_speed")) & 0xff,
					attr.get(JAVA_BYTE, Layouts.off(l, "phys_state")) & 0xff,
					attr.get(JAVA_INT, Layouts.off(l, "port_cap_flags")));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/** {@code ibv_query_gid}. */
	public Gid queryGid(int port, int index) {
		checkPort(port);
		if (index < 0) {
			throw new IllegalArgumentException("GID index must be >= 0, got " + index);
		}
		acquire();
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment gid = arena.allocate(Layouts.IBV_GID);
			int rc = (int) Ibverbs.QUERY_GID.invokeExact(capture, handle, (byte) port, index, gid);
			if (rc != 0) {
				throw new VerbsException("ibv_query_gid", rc < 0 ? Native.errno(capture) : rc,
						deviceName + " port " + port + " index " + index);
			}
			return new Gid(gid.toArray(JAVA_BYTE));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
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
		checkPort(port);
		if (index < 0) {
			throw new IllegalArgumentException("GID index must be >= 0, got " + index);
		}
		acquire();
		try (Arena arena = Arena.ofConfined()) {
			var l = Layouts.IBV_GID_ENTRY;
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment entry = arena.allocate(l);
			int rc = (int) Ibverbs.QUERY_GID_EX.invokeExact(capture, handle, port, index, entry, 0, l.byteSize());
			if (rc != 0) {
				throw new VerbsException("ibv_query_gid_ex", rc < 0 ? Native.errno(capture) : rc,
						deviceName + " port " + port + " index " + index);
			}
			return new GidEntry(new Gid(entry.asSlice(0, 16).toArray(JAVA_BYTE)),
					entry.get(JAVA_INT, Layouts.off(l, "gid_index")), entry.get(JAVA_INT, Layouts.off(l, "port_num")),
					GidEntry.Type.of(entry.get(JAVA_INT, Layouts.off(l, "gid_type"))),
					entry.get(JAVA_INT, Layouts.off(l, "ndev_ifindex")));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
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

	private void checkPort(int port) {
		if (port < 1 || port > 255) {
			throw new IllegalArgumentException("port numbers start at 1, got " + port);
		}
	}

	/**
	 * The function pointer of a {@code struct verbs_context} member, as
	 * {@code verbs_get_ctx_op} reads it: NULL when the context is not a verbs_context,
	 * when the provider's verbs_context is too small to have the member, or when the
	 * member is unset.
	 */
	MemorySegment verbsOp(long relativeOffset) {
		return verbsOp(handle, relativeOffset);
	}

	/** {@link #verbsOp(long)} of the {@code struct ibv_context} at {@code ctx}. */
	static MemorySegment verbsOp(MemorySegment ctx, long relativeOffset) {
		if (ctx.get(JAVA_LONG, Layouts.CONTEXT_ABI_COMPAT) != Layouts.VERBS_ABI_IS_EXTENDED) {
			return MemorySegment.NULL;
		}
		MemorySegment before = MemorySegment.ofAddress(ctx.address() + relativeOffset).reinterpret(-relativeOffset);
		long sz = before.get(JAVA_LONG, before.byteSize() + Layouts.VCTX_SZ);
		if (sz < -relativeOffset + Layouts.IBV_CONTEXT.byteSize()) {
			return MemorySegment.NULL;
		}
		return before.get(ADDRESS, 0);
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
	 * ({@link CompletionQueue#asyncErrors()}).
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
			try (Arena arena = Arena.ofConfined()) {
				MemorySegment capture = Native.allocateCapture(arena);
				MemorySegment fds = arena.allocate(Layouts.POLLFD, 2);
				MemorySegment event = arena.allocate(Layouts.IBV_ASYNC_EVENT);
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
		return new AsyncEvent(type, code, text, cq, qp, element, port);
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
