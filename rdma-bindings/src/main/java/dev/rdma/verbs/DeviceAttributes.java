package dev.rdma.verbs;

import java.util.EnumSet;

/**
 * The device limits, identity and capabilities of {@code ibv_query_device_ex}
 * ({@code struct ibv_device_attr_ex}: its {@code orig_attr}, the
 * {@code struct ibv_device_attr} of {@code ibv_query_device}, plus the extended members
 * below). When the provider has no {@code query_device_ex} the verb falls back to
 * {@code ibv_query_device} and every extended member is 0. An immutable value;
 * {@link Context#queryDevice()} queries it once per context.
 *
 * @param fwVersion firmware version text
 * @param nodeGuid node GUID, host order
 * @param sysImageGuid system image GUID, host order
 * @param maxMrSize largest memory region, bytes
 * @param vendorId IEEE vendor id; 0xFFFFFF for Soft-RoCE (rxe)
 * @param vendorPartId vendor part id
 * @param hwVersion hardware version
 * @param maxQp most QPs the device supports
 * @param maxQpWr most outstanding work requests of one QP
 * @param deviceCapFlags {@code device_cap_flags}, raw: the {@code IBV_DEVICE_*} bits,
 * decoded by {@link #deviceCapabilities()}; bits unknown to {@link DeviceCapability} are
 * kept here
 * @param maxSge most scatter/gather entries of a work request
 * @param maxCq most CQs the device supports
 * @param maxCqe most entries one CQ can have
 * @param maxMr most memory regions
 * @param maxPd most protection domains
 * @param maxSrq most shared receive queues
 * @param physPortCount number of physical ports
 * @param completionTimestampMask {@code completion_timestamp_mask}: the valid bits of a
 * completion timestamp ({@link WcExFlag#COMPLETION_TIMESTAMP}); 0 = the device has no
 * completion timestamps
 * @param hcaCoreClockKhz {@code hca_core_clock}: the frequency of the clock that ticks
 * completion timestamps, kHz (ns = ticks * 1_000_000 / kHz); 0 = unknown
 * @param deviceCapFlagsEx {@code device_cap_flags_ex}, raw: 64-bit extended capability
 * flags (e.g. {@code IBV_DEVICE_RAW_SCATTER_FCS} 1&lt;&lt;34); 0 when the device did not
 * report them
 * @param maxQpRdAtom {@code max_qp_rd_atom}: most RDMA reads and atomics one QP accepts
 * in flight as responder (the largest {@code max_dest_rd_atomic}, and rdma_cm's
 * {@code responder_resources})
 * @param maxQpInitRdAtom {@code max_qp_init_rd_atom}: most RDMA reads and atomics one QP
 * has in flight as initiator (the largest {@code max_rd_atomic}, and rdma_cm's
 * {@code initiator_depth})
 */
public record DeviceAttributes(String fwVersion, long nodeGuid, long sysImageGuid, long maxMrSize, int vendorId,
		int vendorPartId, int hwVersion, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq, int maxCqe,
		int maxMr, int maxPd, int maxSrq, int physPortCount, long completionTimestampMask, long hcaCoreClockKhz,
		long deviceCapFlagsEx, int maxQpRdAtom, int maxQpInitRdAtom) {

	/** Soft-RoCE's vendor id ({@code RXE_VENDOR_ID}). */
	public static final int RXE_VENDOR_ID = 0xFFFFFF;

	/**
	 * The attributes without the read/atomic depths (the constructor of earlier versions
	 * of this record): {@link #maxQpRdAtom()} and {@link #maxQpInitRdAtom()} are 0.
	 */
	public DeviceAttributes(String fwVersion, long nodeGuid, long sysImageGuid, long maxMrSize, int vendorId,
			int vendorPartId, int hwVersion, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq,
			int maxCqe, int maxMr, int maxPd, int maxSrq, int physPortCount, long completionTimestampMask,
			long hcaCoreClockKhz, long deviceCapFlagsEx) {
		this(fwVersion, nodeGuid, sysImageGuid, maxMrSize, vendorId, vendorPartId, hwVersion, maxQp, maxQpWr,
				deviceCapFlags, maxSge, maxCq, maxCqe, maxMr, maxPd, maxSrq, physPortCount, completionTimestampMask,
				hcaCoreClockKhz, deviceCapFlagsEx, 0, 0);
	}

	/**
	 * The attributes of {@code ibv_query_device} alone (the constructor of earlier
	 * versions of this record): no completion timestamps, core clock unknown, no extended
	 * capability flags.
	 */
	public DeviceAttributes(String fwVersion, long nodeGuid, long sysImageGuid, long maxMrSize, int vendorId,
			int vendorPartId, int hwVersion, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq,
			int maxCqe, int maxMr, int maxPd, int maxSrq, int physPortCount) {
		this(fwVersion, nodeGuid, sysImageGuid, maxMrSize, vendorId, vendorPartId, hwVersion, maxQp, maxQpWr,
				deviceCapFlags, maxSge, maxCq, maxCqe, maxMr, maxPd, maxSrq, physPortCount, 0, 0, 0, 0, 0);
	}

	/** True for the Soft-RoCE (rxe) provider. */
	public boolean isSoftRoce() {
		return vendorId == RXE_VENDOR_ID;
	}

	/**
	 * The capabilities of {@link #deviceCapFlags()} that {@link DeviceCapability} names,
	 * as a new mutable set (a copy per call). Bits without a constant are not in it:
	 * {@code DeviceCapability.unknownBits(deviceCapFlags())}.
	 */
	public EnumSet<DeviceCapability> deviceCapabilities() {
		return DeviceCapability.decode(deviceCapFlags);
	}

	/** True when {@link #deviceCapFlags()} has {@code capability}'s bit. */
	public boolean hasCapability(DeviceCapability capability) {
		if (capability == null) {
			throw new IllegalArgumentException("capability must not be null");
		}
		return (deviceCapFlags & capability.bit()) != 0;
	}

	/**
	 * True when the device stamps completions: {@link #completionTimestampMask()} is not
	 * 0.
	 */
	public boolean supportsCompletionTimestamps() {
		return completionTimestampMask != 0;
	}

	/**
	 * Whether an extended CQ of this device can be expected to provide {@code flag} (its
	 * {@code wc_flags} at {@code ibv_create_cq_ex}), from what the device reports:
	 * <ul>
	 * <li>{@link WcExFlag#COMPLETION_TIMESTAMP}: only when
	 * {@link #completionTimestampMask()} is not 0;</li>
	 * <li>{@link WcExFlag#COMPLETION_TIMESTAMP_WALLCLOCK}: only when the mask is not 0
	 * and {@link #hcaCoreClockKhz()} is not 0 (a device that stamps completions but does
	 * not report the frequency of its clock is not expected to offer nanoseconds);</li>
	 * <li>every other flag: true, meaning "not known to be unsupported": the device
	 * reports nothing about it.</li>
	 * </ul>
	 * <p>
	 * A hint, not a promise: false means the provider will refuse the flag; true does not
	 * mean it accepts it. The provider may still refuse a flag at CQ creation with
	 * {@code EOPNOTSUPP} ({@link VerbsException#errno()}), as rxe does for {@code CVLAN},
	 * {@code FLOW_TAG} and {@code TM_INFO}. Pure: reads only this record.
	 * @throws IllegalArgumentException when {@code flag} is null
	 */
	public boolean mayProvide(WcExFlag flag) {
		if (flag == null) {
			throw new IllegalArgumentException("flag must not be null");
		}
		return switch (flag) {
			case COMPLETION_TIMESTAMP -> completionTimestampMask != 0;
			case COMPLETION_TIMESTAMP_WALLCLOCK -> completionTimestampMask != 0 && hcaCoreClockKhz != 0;
			default -> true;
		};
	}
}
