package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The device and port queries of a {@link Context} on its {@code struct ibv_context}:
 * {@code ibv_query_device_ex} (and its fallback), {@code ibv_query_port},
 * {@code ibv_query_gid}, {@code ibv_query_gid_ex}, the decoding of their structs and the
 * {@code verbs_get_ctx_op} lookup. Stateless; the caller holds the context open for the
 * call ({@code acquire}). Errors name the verb, the errno and the device.
 */
final class DeviceQueries {

	private DeviceQueries() {
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

	/** {@code ibv_query_port} (see {@link Context#queryPort}). */
	static PortAttributes queryPort(MemorySegment handle, String deviceName, int port) {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment attr = arena.allocate(Layouts.IBV_PORT_ATTR);
			MemorySegment fn = verbsOp(handle, Layouts.VCTX_QUERY_PORT);
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
	}

	/** {@code ibv_query_gid} (see {@link Context#queryGid}). */
	static Gid queryGid(MemorySegment handle, String deviceName, int port, int index) {
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
	}

	/** {@code ibv_query_gid_ex} (see {@link Context#queryGidEntry}). */
	static GidEntry queryGidEntry(MemorySegment handle, String deviceName, int port, int index) {
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
	}

	static void checkPort(int port) {
		if (port < 1 || port > 255) {
			throw new IllegalArgumentException("port numbers start at 1, got " + port);
		}
	}

	static void checkGidIndex(int port, int index) {
		checkPort(port);
		if (index < 0) {
			throw new IllegalArgumentException("GID index must be >= 0, got " + index);
		}
	}

	/**
	 * The function pointer of a {@code struct verbs_context} member of the
	 * {@code struct ibv_context} at {@code ctx}, as {@code verbs_get_ctx_op} reads it:
	 * NULL when the context is not a verbs_context, when the provider's verbs_context is
	 * too small to have the member, or when the member is unset.
	 */
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

}
