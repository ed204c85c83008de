package dev.rdma.verbs;

/**
 * The device limits and identity of {@code ibv_query_device} ({@code struct ibv_device_attr}).
 *
 * @param fwVersion firmware version text
 * @param nodeGuid node GUID, host order
 * @param vendorId IEEE vendor id; 0xFFFFFF for Soft-RoCE (rxe)
 * @param maxCq most CQs the device supports
 * @param maxCqe most entries one CQ can have
 * @param physPortCount number of physical ports
 */
public record DeviceAttributes(String fwVersion, long nodeGuid, long sysImageGuid, long maxMrSize, int vendorId,
        int vendorPartId, int hwVersion, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq,
        int maxCqe, int maxMr, int maxPd, int maxSrq, int physPortCount) {

    /** Soft-RoCE's vendor id ({@code RXE_VENDOR_ID}). */
    public static final int RXE_VENDOR_ID = 0xFFFFFF;

    /** True for the Soft-RoCE (rxe) provider. */
    public boolean isSoftRoce() {
        return vendorId == RXE_VENDOR_ID;
    }
}
