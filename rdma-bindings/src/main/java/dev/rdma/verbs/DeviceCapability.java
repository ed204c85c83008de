package dev.rdma.verbs;

import java.util.EnumSet;
import java.util.Set;

/**
 * {@code enum ibv_device_cap_flags}: the capability bits of
 * {@code ibv_device_attr.device_cap_flags} ({@link DeviceAttributes#deviceCapFlags()}),
 * decoded by {@link DeviceAttributes#deviceCapabilities()}.
 *
 * <p>
 * Every constant is an {@code IBV_DEVICE_*} bit of that enum in {@code verbs.h}
 * (rdma-core 44 to current: the enum has not changed). Bits a device sets that have no
 * constant here are not decoded; they stay in the raw value (see
 * {@link #unknownBits(int)}). The 64-bit flags of {@code device_cap_flags_ex}
 * ({@code IBV_DEVICE_RAW_SCATTER_FCS}, {@code IBV_DEVICE_PCI_WRITE_END_PADDING}) are not
 * in this enum; read them from {@link DeviceAttributes#deviceCapFlagsEx()}.
 */
public enum DeviceCapability {

	RESIZE_MAX_WR(1), BAD_PKEY_CNTR(1 << 1), BAD_QKEY_CNTR(1 << 2), RAW_MULTI(1 << 3), AUTO_PATH_MIG(1 << 4),
	CHANGE_PHY_PORT(1 << 5), UD_AV_PORT_ENFORCE(1 << 6), CURR_QP_STATE_MOD(1 << 7), SHUTDOWN_PORT(1 << 8),
	INIT_TYPE(1 << 9), PORT_ACTIVE_EVENT(1 << 10), SYS_IMAGE_GUID(1 << 11), RC_RNR_NAK_GEN(1 << 12),
	SRQ_RESIZE(1 << 13),
	/**
	 * The device can generate a completion event after each of several completions
	 * ({@code ibv_req_notify_cq}).
	 */
	N_NOTIFY_CQ(1 << 14), MEM_WINDOW(1 << 17), UD_IP_CSUM(1 << 18), XRC(1 << 20), MEM_MGT_EXTENSIONS(1 << 21),
	MEM_WINDOW_TYPE_2A(1 << 23), MEM_WINDOW_TYPE_2B(1 << 24), RC_IP_CSUM(1 << 25), RAW_IP_CSUM(1 << 26),
	MANAGED_FLOW_STEERING(1 << 29);

	/** The OR of every constant's bit. */
	public static final int KNOWN_MASK = mask(EnumSet.allOf(DeviceCapability.class));

	private final int bit;

	DeviceCapability(int bit) {
		this.bit = bit;
	}

	/** The {@code IBV_DEVICE_*} value. */
	public int bit() {
		return bit;
	}

	/**
	 * The constants whose bit is set in {@code deviceCapFlags}; bits without a constant
	 * are left out.
	 */
	public static EnumSet<DeviceCapability> decode(int deviceCapFlags) {
		EnumSet<DeviceCapability> set = EnumSet.noneOf(DeviceCapability.class);
		for (DeviceCapability c : values()) {
			if ((deviceCapFlags & c.bit) != 0) {
				set.add(c);
			}
		}
		return set;
	}

	/** The bits of {@code deviceCapFlags} that no constant of this enum names. */
	public static int unknownBits(int deviceCapFlags) {
		return deviceCapFlags & ~KNOWN_MASK;
	}

	/** The OR of the bits of {@code capabilities}. */
	public static int mask(Set<DeviceCapability> capabilities) {
		int m = 0;
		for (DeviceCapability c : capabilities) {
			m |= c.bit;
		}
		return m;
	}

}
