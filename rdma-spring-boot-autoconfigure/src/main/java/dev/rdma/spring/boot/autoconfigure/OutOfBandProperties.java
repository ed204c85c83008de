package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/** Options of a connection's out-of-band exchange. */
@ConfigurationPropertiesSource
public class OutOfBandProperties {

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
