package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/** Options of a connection's out-of-band exchange. */
@ConfigurationPropertiesSource
public class OutOfBandProperties {

	/**
	 * {@link #getLiveness()}: the TCP connection is the liveness channel (the default).
	 */
	public static final String LIVENESS_TCP = "tcp";

	/** {@link #getLiveness()}: the TCP connection is closed after the exchange. */
	public static final String LIVENESS_NONE = "none";

	/** Port number of the RDMA device (of the connection's queues), 1..255. */
	private int port = 1;

	/**
	 * Local GID index, 0..255; omitted = the first IPv4 RoCE v2 GID among the first 16
	 * entries of the port's GID table (none on InfiniBand).
	 */
	private @Nullable Integer gidIndex;

	/**
	 * Path MTU of the connection's QP in bytes: 256, 512, 1024, 2048 or 4096, at most the
	 * port's active MTU; omitted = 1024 (ibv_rc_pingpong's default), or the port's active
	 * MTU when it is lower. The endpoint records do not carry it: set the same value on
	 * both ends.
	 */
	private @Nullable Integer pathMtu;

	/**
	 * What tells that the peer went away: tcp (the exchange's TCP connection stays open,
	 * its end ends the link; both ends must be applications of this starter) or none (the
	 * TCP connection is closed after the records, as ibv_rc_pingpong does; the link ends
	 * only on a failed completion, e.g. a send to a peer whose QP is gone fails with
	 * RETRY_EXC_ERR after about 0.5 s, the QP's retry count being at most 6; set the same
	 * on both ends).
	 */
	private String liveness = "tcp";

	public String getLiveness() {
		return liveness;
	}

	public void setLiveness(String liveness) {
		this.liveness = liveness;
	}

	public int getPort() {
		return port;
	}

	public @Nullable Integer getPathMtu() {
		return pathMtu;
	}

	public void setPathMtu(@Nullable Integer pathMtu) {
		this.pathMtu = pathMtu;
	}

	public void setPort(int port) {
		this.port = port;
	}

	public @Nullable Integer getGidIndex() {
		return gidIndex;
	}

	public void setGidIndex(@Nullable Integer gidIndex) {
		this.gidIndex = gidIndex;
	}

}
