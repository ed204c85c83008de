package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * The RDMA devices of this host ({@code ibv_get_device_list} /
 * {@code ibv_free_device_list}).
 *
 * <p>
 * On a host without an RDMA subsystem the verb returns NULL with ENOSYS: that is an empty
 * list, not a failure. Open the contexts you need before closing the list. Not
 * thread-safe; close it on the thread that opened it.
 */
public final class DeviceList implements AutoCloseable {

	private final MemorySegment list;

	private final List<Device> devices;

	private boolean closed;

	private DeviceList(MemorySegment list) {
		this.list = list;
		List<Device> out = new ArrayList<>();
		if (!Native.isNull(list)) {
			MemorySegment array = list.reinterpret(Long.MAX_VALUE);
			for (long i = 0;; i++) {
				MemorySegment device = array.getAtIndex(ADDRESS, i);
				if (Native.isNull(device)) {
					break;
				}
				out.add(new Device(this, device));
			}
		}
		this.devices = Collections.unmodifiableList(out);
	}

	/**
	 * {@code ibv_get_device_list}.
	 * @throws RdmaUnavailableException when libibverbs is missing
	 * @throws VerbsException when the verb fails for another reason than a missing RDMA
	 * subsystem (ENOSYS)
	 */
	public static DeviceList open() {
		Rdma.requireLibrary();
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment capture = Native.allocateCapture(arena);
			MemorySegment numDevices = arena.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
			MemorySegment list = (MemorySegment) Ibverbs.GET_DEVICE_LIST.invokeExact(capture, numDevices);
			if (Native.isNull(list)) {
				int errno = Native.errno(capture);
				if (errno != Errno.ENOSYS && errno != 0) {
					throw new VerbsException("ibv_get_device_list", errno, null);
				}
			}
			return new DeviceList(list);
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
	}

	/** The devices, in the order libibverbs lists them. */
	public List<Device> devices() {
		ensureOpen();
		return devices;
	}

	/** The device called {@code name}. */
	public Optional<Device> byName(String name) {
		return devices().stream().filter(d -> d.name().equals(name)).findFirst();
	}

	/** The device whose GUID is {@code guid} (host order). */
	public Optional<Device> byGuid(long guid) {
		return devices().stream().filter(d -> d.guid() == guid).findFirst();
	}

	void ensureOpen() {
		if (closed) {
			throw new IllegalStateException("the device list is closed");
		}
	}

	/** {@code ibv_free_device_list}; idempotent. Contexts opened from it stay open. */
	@Override
	public void close() {
		if (closed) {
			return;
		}
		closed = true;
		if (!Native.isNull(list)) {
			try {
				Ibverbs.FREE_DEVICE_LIST.invokeExact(list);
			}
			catch (Throwable t) {
				throw new IllegalStateException(t);
			}
		}
	}

}
