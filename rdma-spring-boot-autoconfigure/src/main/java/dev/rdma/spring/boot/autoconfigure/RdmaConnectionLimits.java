package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.DeviceAttributes;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.cm.CmParameters;

/**
 * Checks {@code rdma.connections} against what only the device of their queues can tell,
 * when {@link RdmaResources#openDevice} opens it (before any queue, queue pair or
 * connection exists): {@code send-depth} and {@code receive-depth} against
 * {@code max_qp_wr}, {@code cm.responder-resources} and {@code cm.initiator-depth}
 * against {@code max_qp_rd_atom} and {@code max_qp_init_rd_atom} (rdma_cm and the
 * out-of-band exchange both apply them), and for {@code exchange: out-of-band} its
 * {@code port} against the device's ports, its {@code path-mtu} against the port's active
 * MTU and its {@code gid-index} against the port's GID table (its length, and whether the
 * entry holds a GID). Without these, startup succeeded and every connection attempt of a
 * client failed ({@code ibv_create_qp} or {@code ibv_modify_qp} {@code EINVAL}), a
 * server's at its first peer. Each failure is a {@link RdmaConfigurationException} naming
 * the full property, the limit and where it comes from. Pure: the device is seen through
 * a {@link DeviceView}.
 */
final class RdmaConnectionLimits {

	private RdmaConnectionLimits() {
	}

	/** What the checks read of an open device. */
	interface DeviceView {

		/** The device's name, e.g. {@code rxe0}. */
		String name();

		/** {@code ibv_query_device}. */
		DeviceAttributes attributes();

		/** {@code ibv_query_port} of a port that exists. */
		PortAttributes port(int port);

		/**
		 * {@code ibv_query_gid} of an index within the port's table: the GID, or null
		 * when the entry is empty.
		 */
		@Nullable Gid gid(int port, int index);

	}

	/** Checks every connection whose queues are on device {@code deviceKey}. */
	static void check(RdmaProperties properties, String deviceKey, DeviceView device) {
		properties.getConnections().forEach((key, c) -> {
			String queue = c.getSendQueue();
			if (queue == null || !properties.getCompletionQueues().containsKey(queue)) {
				return; // refused by RdmaConnectionProperties before any device is opened
			}
			String queueDevice = RdmaPropertiesValidator.resolveDevice(properties,
					RdmaPropertiesValidator.QUEUES + queue, properties.getCompletionQueues().get(queue).getDevice());
			if (queueDevice.equals(deviceKey)) {
				check(RdmaConnectionProperties.CONNECTIONS + key, c, device);
			}
		});
	}

	/**
	 * Checks connection {@code path} (its properties {@code c}) against {@code device}.
	 */
	static void check(String path, ConnectionProperties c, DeviceView device) {
		DeviceAttributes attributes = device.attributes();
		// the send queue has one slot more than send-depth: the close's marker
		// (PeerSends.postMarker), so max_send_wr is send-depth + 1
		depth(path + ".send-depth", c.getSendDepth(), true, attributes, device.name());
		depth(path + ".receive-depth", c.getReceiveDepth(), false, attributes, device.name());
		if (c.getSharedReceiveQueue().isEnabled() && attributes.maxSrq() == 0) {
			String srqPath = path + ".shared-receive-queue.enabled";
			throw new RdmaConfigurationException(srqPath,
					srqPath + "=true, but device " + device.name()
							+ " offers no shared receive queue (max_srq 0, ibv_query_device)",
					"Remove " + srqPath + " (each peer then has receive-depth buffers of its own).");
		}
		readAtomic(path + ".cm.responder-resources", c.getCm().getResponderResources(), attributes.maxQpRdAtom(),
				"max_qp_rd_atom", device.name());
		readAtomic(path + ".cm.initiator-depth", c.getCm().getInitiatorDepth(), attributes.maxQpInitRdAtom(),
				"max_qp_init_rd_atom", device.name());
		if (c.getExchange() != ConnectionExchange.OUT_OF_BAND) {
			return;
		}
		String portPath = path + ".out-of-band.port";
		int port = c.getOutOfBand().getPort();
		if (port > attributes.physPortCount()) {
			throw new RdmaConfigurationException(portPath,
					portPath + "=" + port + " exceeds the " + attributes.physPortCount() + " port(s) of device "
							+ device.name() + " (phys_port_cnt, ibv_query_device)",
					"Set " + portPath + " between 1 and " + attributes.physPortCount() + ".");
		}
		Integer pathMtu = c.getOutOfBand().getPathMtu();
		Integer gidIndex = c.getOutOfBand().getGidIndex();
		if (pathMtu == null && gidIndex == null) {
			return; // the default MTU and the GID are found at each attempt
		}
		PortAttributes portAttributes = device.port(port);
		int activeMtu = portAttributes.activeMtu();
		if (pathMtu != null && pathMtu > activeMtu) {
			String mtuPath = path + ".out-of-band.path-mtu";
			throw new RdmaConfigurationException(mtuPath,
					mtuPath + "=" + pathMtu + " exceeds the active MTU " + activeMtu + " of port " + port
							+ " of device " + device.name() + " (active_mtu, ibv_query_port)",
					"Set " + mtuPath + " to at most " + activeMtu + " (the same on both ends), or remove it for "
							+ "1024 (or the active MTU when lower).");
		}
		if (gidIndex == null) {
			return; // found by type at each attempt
		}
		String gidPath = path + ".out-of-band.gid-index";
		String advice = ", or remove " + gidPath + " to use the port's first IPv4 RoCE v2 GID.";
		int tableLength = portAttributes.gidTableLength();
		if (gidIndex >= tableLength) {
			throw new RdmaConfigurationException(gidPath,
					gidPath + "=" + gidIndex + " is beyond the GID table of port " + port + " of device "
							+ device.name() + " (gid_tbl_len " + tableLength + ", ibv_query_port)",
					"Set " + gidPath + " between 0 and " + (tableLength - 1) + advice);
		}
		Gid gid = device.gid(port, gidIndex);
		if (gid == null || gid.isZero()) {
			throw new RdmaConfigurationException(gidPath,
					gidPath + "=" + gidIndex + " names an empty entry of the GID table of port " + port + " of device "
							+ device.name() + " (ibv_query_gid)",
					"Set " + gidPath + " to the index of one of the port's GIDs (ibv_devinfo -v)" + advice);
		}
	}

	/**
	 * rdma_cm refuses a depth above the device's ({@code rdma_connect} and
	 * {@code rdma_accept}: EINVAL) unless it is 255, the device's maximum; the
	 * out-of-band exchange sets it as max_dest_rd_atomic / max_rd_atomic (255 meaning 1),
	 * which {@code ibv_modify_qp} refuses above the device's.
	 */
	private static void readAtomic(String path, int value, int limit, String name, String deviceName) {
		if (value != CmParameters.DEVICE_MAXIMUM && value > limit) {
			throw new RdmaConfigurationException(path,
					path + "=" + value + " exceeds " + name + " " + limit + " of device " + deviceName
							+ " (ibv_query_device)",
					"Set " + path + " to at most " + limit + ", or to 255 for the device's maximum.");
		}
	}

	/**
	 * @param marker the send queue's depth: one work request more than {@code depth} (the
	 * close's marker) must fit in {@code max_qp_wr}
	 */
	private static void depth(String path, int depth, boolean marker, DeviceAttributes attributes, String deviceName) {
		int limit = marker ? attributes.maxQpWr() - 1 : attributes.maxQpWr();
		if (depth > limit) {
			throw new RdmaConfigurationException(path,
					path + "=" + depth + " exceeds max_qp_wr " + attributes.maxQpWr() + " of device " + deviceName
							+ (marker ? " less the send queue's slot for the close marker" : "")
							+ " (ibv_query_device)",
					"Set " + path + " to at most " + limit + ".");
		}
	}

}
