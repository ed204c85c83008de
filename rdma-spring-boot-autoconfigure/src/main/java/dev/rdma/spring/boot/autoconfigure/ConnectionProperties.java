package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;
import org.springframework.boot.context.properties.NestedConfigurationProperty;
import org.springframework.util.unit.DataSize;

/**
 * A connection to another application: an RC queue pair connected through rdma_cm, with
 * registered send and receive buffers.
 */
@ConfigurationPropertiesSource
public class ConnectionProperties {

	/**
	 * Server: the address to listen on, host:port, an IP address of this host's RDMA
	 * netdev (e.g. 10.0.0.2:7471). Exactly one of listen and connect is set.
	 */
	private @Nullable String listen;

	/**
	 * Client: the server's address, host:port (e.g. 10.0.0.2:7471). Exactly one of listen
	 * and connect is set.
	 */
	private @Nullable String connect;

	/**
	 * How the queue pairs are connected: cm (rdma_cm, listen and connect are RDMA
	 * addresses) or out-of-band (endpoint records exchanged over TCP in ibv_rc_pingpong's
	 * format, listen and connect are the TCP addresses of the exchange, the RDMA device
	 * is that of the queues; the TCP connection stays open to tell when the peer goes
	 * away, unless out-of-band.liveness is none).
	 */
	private ConnectionExchange exchange = ConnectionExchange.CM;

	/**
	 * Client: the local IP address to connect from (rdma_resolve_addr's source), which
	 * picks the local RDMA device; omitted = chosen by routing.
	 */
	private @Nullable String source;

	/** Server: most peers connected at once; more are rejected. */
	private int maxPeers = 1;

	/**
	 * Server: the peers it accepts, as IPv4 or IPv6 addresses and CIDR ranges (e.g.
	 * 10.0.0.0/24, fd00::/8); a peer from elsewhere is rejected before anything is made
	 * for it (out of band: its TCP connection is closed). Empty = every peer. Not
	 * authentication: see docs/connections.md.
	 */
	private List<String> allowedPeers = new ArrayList<>();

	/**
	 * Bound of one connection attempt (address and route resolution, connect) or one
	 * accept.
	 */
	private Duration connectTimeout = Duration.ofSeconds(5);

	/** Client: back-off between connection attempts. */
	@NestedConfigurationProperty
	private final RetryProperties retry = new RetryProperties();

	/**
	 * Key of the device under rdma.devices the connection is on; omitted = that of its
	 * queues. The address must be on this device's netdev.
	 */
	private @Nullable String device;

	/**
	 * Key of the completion queue (under rdma.completion-queues) of the sends. The
	 * connections' router becomes its listener.
	 */
	private @Nullable String sendQueue;

	/**
	 * Key of the completion queue (under rdma.completion-queues) of the receives; may be
	 * the send queue.
	 */
	private @Nullable String receiveQueue;

	/**
	 * Sends in flight at most, and the number of registered send buffers (max_send_wr is
	 * one more: the close marker's slot; at most the device's max_qp_wr - 1).
	 */
	private int sendDepth = 64;

	/** Receive queue depth (max_recv_wr). */
	private int receiveDepth = 64;

	/**
	 * Registered receive buffers kept posted, at most receive-depth; omitted =
	 * receive-depth.
	 */
	private @Nullable Integer receiveBuffers;

	/** Bytes of each send and receive buffer: the largest message. */
	private int messageSize = 4096;

	/**
	 * Inline data asked for the queue pair (max_inline_data): a message of at most what
	 * the device grants is copied into the send queue by the post (IBV_SEND_INLINE), not
	 * read from its buffer by the device; 0 = no inline sends.
	 */
	private int maxInlineData = 64;

	/**
	 * One send in this many is posted signaled (selective signaling); the buffers of the
	 * unsignaled sends before it are given back, and counted as sent, in order, when its
	 * completion arrives. 1 = every send signaled and counted as soon as it completes.
	 */
	private int signalInterval = 1;

	/**
	 * How long a send waits for a free send buffer when all are in flight before it
	 * throws SendQueueFullException; 0 = throw at once.
	 */
	private Duration sendTimeout = Duration.ofSeconds(1);

	/**
	 * Whether the rdma health indicator is DOWN while this connection is not established
	 * (a server: not listening).
	 */
	private boolean required = true;

	/**
	 * Size of the memory region each peer connection registers for the peer's one-sided
	 * RDMA WRITE and READ (remote write and read access) and advertises to it when
	 * connecting; 0 = none. At most 1GB.
	 */
	private DataSize remoteAccessSize = DataSize.ofBytes(0);

	/**
	 * rdma_cm connection parameters (struct rdma_conn_param); with out-of-band,
	 * retry-count and rnr-retry-count set the QP's, responder-resources and
	 * initiator-depth its max_dest_rd_atomic and max_rd_atomic (255: 1).
	 */
	@NestedConfigurationProperty
	private final CmProperties cm = new CmProperties();

	/** Options of the out-of-band exchange (exchange: out-of-band only). */
	@NestedConfigurationProperty
	private final OutOfBandProperties outOfBand = new OutOfBandProperties();

	/** Server: one shared receive queue for all peers (shared-receive-queue.enabled). */
	@NestedConfigurationProperty
	private final SharedReceiveQueueProperties sharedReceiveQueue = new SharedReceiveQueueProperties();

	public @Nullable String getListen() {
		return listen;
	}

	public void setListen(@Nullable String listen) {
		this.listen = listen;
	}

	public @Nullable String getConnect() {
		return connect;
	}

	public void setConnect(@Nullable String connect) {
		this.connect = connect;
	}

	public ConnectionExchange getExchange() {
		return exchange;
	}

	public void setExchange(ConnectionExchange exchange) {
		this.exchange = exchange;
	}

	public @Nullable String getSource() {
		return source;
	}

	public void setSource(@Nullable String source) {
		this.source = source;
	}

	public int getMaxPeers() {
		return maxPeers;
	}

	public void setMaxPeers(int maxPeers) {
		this.maxPeers = maxPeers;
	}

	public List<String> getAllowedPeers() {
		return allowedPeers;
	}

	public void setAllowedPeers(List<String> allowedPeers) {
		this.allowedPeers = allowedPeers;
	}

	public Duration getConnectTimeout() {
		return connectTimeout;
	}

	public void setConnectTimeout(Duration connectTimeout) {
		this.connectTimeout = connectTimeout;
	}

	public RetryProperties getRetry() {
		return retry;
	}

	public @Nullable String getDevice() {
		return device;
	}

	public void setDevice(@Nullable String device) {
		this.device = device;
	}

	public @Nullable String getSendQueue() {
		return sendQueue;
	}

	public void setSendQueue(@Nullable String sendQueue) {
		this.sendQueue = sendQueue;
	}

	public @Nullable String getReceiveQueue() {
		return receiveQueue;
	}

	public void setReceiveQueue(@Nullable String receiveQueue) {
		this.receiveQueue = receiveQueue;
	}

	public int getSendDepth() {
		return sendDepth;
	}

	public void setSendDepth(int sendDepth) {
		this.sendDepth = sendDepth;
	}

	public int getReceiveDepth() {
		return receiveDepth;
	}

	public void setReceiveDepth(int receiveDepth) {
		this.receiveDepth = receiveDepth;
	}

	public @Nullable Integer getReceiveBuffers() {
		return receiveBuffers;
	}

	public void setReceiveBuffers(@Nullable Integer receiveBuffers) {
		this.receiveBuffers = receiveBuffers;
	}

	public int getMessageSize() {
		return messageSize;
	}

	public void setMessageSize(int messageSize) {
		this.messageSize = messageSize;
	}

	public int getMaxInlineData() {
		return maxInlineData;
	}

	public void setMaxInlineData(int maxInlineData) {
		this.maxInlineData = maxInlineData;
	}

	public int getSignalInterval() {
		return signalInterval;
	}

	public void setSignalInterval(int signalInterval) {
		this.signalInterval = signalInterval;
	}

	public Duration getSendTimeout() {
		return sendTimeout;
	}

	public void setSendTimeout(Duration sendTimeout) {
		this.sendTimeout = sendTimeout;
	}

	public boolean isRequired() {
		return required;
	}

	public void setRequired(boolean required) {
		this.required = required;
	}

	public DataSize getRemoteAccessSize() {
		return remoteAccessSize;
	}

	public void setRemoteAccessSize(DataSize remoteAccessSize) {
		this.remoteAccessSize = remoteAccessSize;
	}

	public CmProperties getCm() {
		return cm;
	}

	public OutOfBandProperties getOutOfBand() {
		return outOfBand;
	}

	public SharedReceiveQueueProperties getSharedReceiveQueue() {
		return sharedReceiveQueue;
	}

}
