package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.function.Consumer;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.Errno;
import dev.rdma.verbs.RdmaUnavailableException;
import dev.rdma.verbs.DeviceFiles;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Rdmacm;
import dev.rdma.verbs.ffm.RdmacmLayouts;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A connection-manager event channel ({@code struct rdma_event_channel *},
 * {@code rdma_create_event_channel} / {@code rdma_destroy_event_channel}): the file
 * descriptor through which librdmacm reports the events of every {@link ConnectionId}
 * created on it.
 *
 * <p>
 * Its fd is put in non-blocking mode at creation, so no thread ever blocks inside
 * librdmacm: a thread waiting for an event of a connection id
 * ({@link ConnectionId#getEvent}) waits with {@code poll(2)} on the channel fd, on the
 * id's own wake-up eventfd (signalled by {@link ConnectionId#wakeUp()}, by the id's
 * close, or when another thread read an event of that id) and on the channel's close
 * eventfd, with a timeout. Whichever thread reads an event ({@code rdma_get_cm_event})
 * copies it, acknowledges it ({@code rdma_ack_cm_event}) at once and queues it on the id
 * it belongs to (a connect request on its listener), under one lock: the events of an id
 * queue in the order the channel reported them. Several ids, and several threads, may
 * share one channel.
 *
 * <p>
 * Thread-safe. {@link #close()} is idempotent: it closes every connection id of the
 * channel first (newest first), wakes the threads waiting on it, then destroys the
 * channel. A close refused because a call on another thread did not return within 10 s
 * ({@link IllegalStateException}) leaves the channel open and delivering events (its ids
 * are closed). Requires librdmacm ({@link #create()} throws
 * {@link RdmaUnavailableException} naming the package {@code librdmacm1} when it is
 * missing; the rest of the binding does not need it).
 */
public final class EventChannel extends CmObject {

	/** Every event read, at DEBUG (diagnostics of a connection that does not come up). */
	private static final System.Logger LOG = System.getLogger(EventChannel.class.getName());

	private final int fd;

	private final Signal closeSignal = new Signal("the close signal of an rdma_cm event channel");

	/**
	 * Serialises rdma_get_cm_event + ack + delivery to the id's queue with each other and
	 * with rdma_destroy_id.
	 */
	final Object eventLock = new Object();

	private final IdRegistry<ConnectionId> ids = new IdRegistry<>();

	private EventChannel(MemorySegment channel) {
		super(channel);
		this.fd = channel.get(JAVA_INT, RdmacmLayouts.CHANNEL_FD);
	}

	/** True when librdmacm.so.1 is loaded (package {@code librdmacm1}). */
	public static boolean isAvailable() {
		return Rdmacm.available();
	}

	/**
	 * Throws {@link RdmaUnavailableException} naming the package to install when
	 * librdmacm is missing.
	 */
	public static void requireLibrary() {
		String why = Rdmacm.unavailableReason();
		if (why != null) {
			throw new RdmaUnavailableException(why, Rdmacm.LOAD_FAILURE);
		}
	}

	/**
	 * {@code rdma_create_event_channel}, then {@code O_NONBLOCK} on its fd.
	 * @throws RdmaUnavailableException when librdmacm is missing
	 * @throws VerbsException when the call fails (ENODEV: no RDMA device / rdma_ucm
	 * module)
	 */
	public static EventChannel create() {
		requireLibrary();
		MemorySegment channel;
		try (Arena a = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(a);
			channel = (MemorySegment) Rdmacm.CREATE_EVENT_CHANNEL.invokeExact(capture);
			if (Native.isNull(channel)) {
				int errno = Native.errno(capture);
				throw new VerbsException("rdma_create_event_channel", errno,
						DeviceFiles.isAccessDenied(errno, DeviceFiles.RDMA_CM)
								? DeviceFiles.explainAccess(DeviceFiles.RDMA_CM)
								: "is the rdma_ucm kernel module loaded?");
			}
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		MemorySegment created = channel.reinterpret(RdmacmLayouts.RDMA_EVENT_CHANNEL.byteSize());
		EventChannel c;
		try {
			c = new EventChannel(created);
		}
		catch (RuntimeException | Error e) {
			destroyChannel(created);
			throw e;
		}
		int errno = Libc.setNonBlocking(c.fd);
		if (errno != 0) {
			c.close();
			throw new VerbsException("fcntl(F_SETFL, O_NONBLOCK)", errno, "rdma_cm event channel fd " + c.fd);
		}
		return c;
	}

	private static void destroyChannel(MemorySegment channel) {
		try {
			Rdmacm.DESTROY_EVENT_CHANNEL.invokeExact(channel);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/** {@code channel->fd}, non-blocking. Never read it yourself. */
	public int fd() {
		return fd;
	}

	/**
	 * {@code rdma_create_id(channel, &id, NULL, RDMA_PS_TCP)}: a connection id for a
	 * reliable-connected (RC) queue pair, whose events arrive on this channel. Closed by
	 * its own {@link ConnectionId#close()} or by this channel's.
	 */
	public ConnectionId createId() {
		acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment out = a.allocate(ADDRESS);
			MemorySegment capture = Native.allocateCapture(a);
			int rc = (int) Rdmacm.CREATE_ID.invokeExact(capture, handle, out, MemorySegment.NULL,
					RdmacmLayouts.RDMA_PS_TCP);
			if (rc != 0) {
				throw new VerbsException("rdma_create_id", Native.errno(capture), describe());
			}
			return adopt(out.get(ADDRESS, 0), null);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			release();
		}
	}

	/** Wraps a native id (a new one, or the id of a connect request) and registers it. */
	private ConnectionId adopt(MemorySegment id, @Nullable ConnectionId listener) {
		MemorySegment sized = id.reinterpret(RdmacmLayouts.RDMA_CM_ID.byteSize());
		ConnectionId c;
		try {
			c = new ConnectionId(this, sized, listener);
		}
		catch (RuntimeException | Error e) {
			destroyIdQuietly(sized);
			throw e;
		}
		ids.add(sized.address(), c);
		return c;
	}

	/**
	 * Unregisters a destroyed id; a new id that librdmacm gave the same address meanwhile
	 * stays registered.
	 */
	void forget(ConnectionId id) {
		ids.remove(id.address(), id);
	}

	static void destroyIdQuietly(MemorySegment id) {
		try {
			int ignored = (int) Rdmacm.DESTROY_ID.invokeExact(Native.allocateCapture(Arena.ofAuto()), id);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	@Override
	String describe() {
		return "EventChannel[fd " + fd + "]";
	}

	/**
	 * Waits up to {@code timeoutNanos} for the channel fd, {@code waiter}'s signal or the
	 * close signal, then reads and dispatches at most one event. Returns when something
	 * happened or the time is up; the caller looks at its queue again. With
	 * {@code scratch} the poll uses the waiter's signal's scratch memory (the caller
	 * holds it, see {@link IdEvents#next}), else memory of its own.
	 */
	void pump(ConnectionId waiter, long timeoutNanos, boolean scratch) {
		if (scratch) {
			Signal s = waiter.events.signal;
			pump(waiter, timeoutNanos, s.pollFds, s.pollCapture);
			return;
		}
		try (Arena a = Arena.ofConfined()) {
			pump(waiter, timeoutNanos, a.allocate(Layouts.POLLFD, 3), Native.allocateCapture(a));
		}
	}

	private void pump(ConnectionId waiter, long timeoutNanos, MemorySegment fds, MemorySegment capture) {
		acquire();
		try {
			Libc.pollfd(fds, 0, fd);
			Libc.pollfd(fds, 1, waiter.events.signal.fd());
			Libc.pollfd(fds, 2, closeSignal.fd());
			int millis = timeoutNanos <= 0 ? 0
					: (int) Math.min(Integer.MAX_VALUE, (timeoutNanos + 999_999) / 1_000_000);
			int rc = Libc.poll(fds, 3, millis, capture);
			if (rc < 0) {
				if (rc == -Errno.EINTR) {
					return;
				}
				throw new VerbsException("poll(rdma_cm event channel fd)", -rc, describe());
			}
			if (rc == 0) {
				return;
			}
			if (Libc.readable(fds, 1)) {
				waiter.events.signal.clear();
			}
			if (Libc.readable(fds, 0) && !Libc.readable(fds, 2)) {
				readOne();
			}
		}
		finally {
			release();
		}
	}

	/**
	 * {@code rdma_get_cm_event} (non-blocking), copy, {@code rdma_ack_cm_event}, queue on
	 * the id, all under {@link #eventLock}: the events of one id queue in the order the
	 * channel gave them, whichever threads read them. Nothing when another thread took
	 * the event first (EAGAIN).
	 */
	private void readOne() {
		CmEvent event;
		ConnectionId target;
		synchronized (eventLock) {
			try (Arena a = Arena.ofConfined()) {
				MemorySegment out = a.allocate(ADDRESS);
				MemorySegment capture = Native.allocateCapture(a);
				int rc = (int) Rdmacm.GET_CM_EVENT.invokeExact(capture, handle, out);
				if (rc != 0) {
					int errno = Native.errno(capture);
					if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
						return;
					}
					throw new VerbsException("rdma_get_cm_event", errno, describe());
				}
				MemorySegment ev = out.get(ADDRESS, 0).reinterpret(RdmacmLayouts.RDMA_CM_EVENT.byteSize());
				try {
					int code = ev.get(JAVA_INT, RdmacmLayouts.EVENT_EVENT);
					if (LOG.isLoggable(System.Logger.Level.DEBUG)) {
						LOG.log(System.Logger.Level.DEBUG, "rdma_get_cm_event: event " + code + " id 0x"
								+ Long.toHexString(ev.get(ADDRESS, RdmacmLayouts.EVENT_ID).address()) + " listen 0x"
								+ Long.toHexString(ev.get(ADDRESS, RdmacmLayouts.EVENT_LISTEN_ID).address()) + " known "
								+ ids.addresses());
					}
					CmEventType type = CmEventType.of(code);
					long idAddress = ev.get(ADDRESS, RdmacmLayouts.EVENT_ID).address();
					ConnectionId listener = null;
					if (type == CmEventType.CONNECT_REQUEST) {
						listener = ids.get(ev.get(ADDRESS, RdmacmLayouts.EVENT_LISTEN_ID).address());
						if (listener == null) {
							return; // a request for a listener being closed: acked below,
									// dropped
						}
						// the event goes to the listener; it names the new id of the
						// request
						ConnectionId request = adopt(ev.get(ADDRESS, RdmacmLayouts.EVENT_ID), listener);
						target = listener;
						event = copy(ev, type, code, request, listener);
					}
					else {
						target = ids.get(idAddress);
						if (target == null) {
							return; // an id closed meanwhile: acked below, dropped
						}
						event = copy(ev, type, code, target, null);
					}
				}
				finally {
					int ack = (int) Rdmacm.ACK_CM_EVENT.invokeExact(capture, ev);
					if (ack != 0) {
						throw new VerbsException("rdma_ack_cm_event", Native.errno(capture), describe());
					}
				}
			}
			catch (Throwable t) {
				throw Native.unchecked(t);
			}
			Consumer<CmEvent> hook = beforeDeliver;
			if (hook != null) {
				hook.accept(event);
			}
			// under the lock too: events read one after the other by two threads queue on
			// their id in that order (a queue add and an eventfd write: nothing blocks,
			// no application code runs)
			target.events.deliver(event);
		}
	}

	/**
	 * Tests only: run by the thread that read an event, between its
	 * {@code rdma_ack_cm_event} and its delivery to the id's queue (under the event
	 * lock). Null in production.
	 */
	static volatile @Nullable Consumer<CmEvent> beforeDeliver;

	private static CmEvent copy(MemorySegment ev, CmEventType type, int code, ConnectionId target,
			@Nullable ConnectionId listener) {
		int status = ev.get(JAVA_INT, RdmacmLayouts.EVENT_STATUS);
		long conn = RdmacmLayouts.EVENT_CONN;
		var l = RdmacmLayouts.RDMA_CONN_PARAM;
		byte[] data = new byte[0];
		int responder = 0;
		int initiator = 0;
		int qpNum = 0;
		boolean hasConnParam = switch (type) {
			case CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED, REJECTED, CONNECT_ERROR, UNREACHABLE, DISCONNECTED ->
				true;
			default -> false;
		};
		if (hasConnParam) {
			MemorySegment pd = ev.get(ADDRESS, conn + Layouts.off(l, "private_data"));
			int len = Byte.toUnsignedInt(ev.get(JAVA_BYTE, conn + Layouts.off(l, "private_data_len")));
			if (!Native.isNull(pd) && len > 0) {
				data = pd.reinterpret(len).toArray(JAVA_BYTE);
			}
			responder = Byte.toUnsignedInt(ev.get(JAVA_BYTE, conn + Layouts.off(l, "responder_resources")));
			initiator = Byte.toUnsignedInt(ev.get(JAVA_BYTE, conn + Layouts.off(l, "initiator_depth")));
			qpNum = ev.get(JAVA_INT, conn + Layouts.off(l, "qp_num"));
		}
		return new CmEvent(type, status, CmEventType.text(code), target, listener, data, responder, initiator, qpNum);
	}

	@Override
	void closeDependants() {
		List<ConnectionId> snapshot = ids.snapshot();
		for (int i = snapshot.size() - 1; i >= 0; i--) {
			snapshot.get(i).close();
		}
	}

	@Override
	void beforeClose() {
		closeSignal.raise();
	}

	/**
	 * A refused close lowers the close signal again: raised, it made every wait on the
	 * channel skip the read and spin until its timeout, so no event was delivered.
	 */
	@Override
	void closeRefused() {
		closeSignal.clear();
	}

	@Override
	void destroy() {
		// an id adopted from a connect request that raced with closeDependants
		closeDependants();
		destroyChannel(handle);
		closeSignal.close();
	}

}
