package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;

import java.lang.foreign.MemorySegment;

/**
 * An RDMA device of a {@link DeviceList} ({@code struct ibv_device *}). Valid only while
 * its list is open; open a {@link Context} with {@link #open()} before closing the list.
 */
public final class Device {

	private final DeviceList list;

	private final MemorySegment device;

	private final String name;

	private final long guid;

	Device(DeviceList list, MemorySegment device) {
		this.list = list;
		this.device = device;
		try {
			this.name = Native.string((MemorySegment) Ibverbs.GET_DEVICE_NAME.invokeExact(device));
			this.guid = Long.reverseBytes((long) Ibverbs.GET_DEVICE_GUID.invokeExact(device));
		}
		catch (Throwable t) {
			throw new IllegalStateException(t);
		}
	}

	/** {@code ibv_get_device_name}, e.g. {@code rxe0}, {@code mlx5_0}. */
	public String name() {
		return name;
	}

	/** {@code ibv_get_device_guid} in host order (the verb returns it big-endian). */
	public long guid() {
		return guid;
	}

	/** The GUID as rdma-core tools print it: {@code 0x505400fffe727865}. */
	public String guidString() {
		return String.format("0x%016x", guid);
	}

	/** {@code ibv_open_device}. The context stays valid after the list is closed. */
	public Context open() {
		list.ensureOpen();
		return Context.open(this, device);
	}

	@Override
	public String toString() {
		return "Device[" + name + ", guid " + guidString() + "]";
	}

}
