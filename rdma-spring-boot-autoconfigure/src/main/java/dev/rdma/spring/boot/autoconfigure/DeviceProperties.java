package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/** An RDMA device to open ({@code ibv_open_device}). */
@ConfigurationPropertiesSource
public class DeviceProperties {

	/**
	 * Device name as ibv_devices lists it, e.g. mlx5_0 or rxe0. Omit both name and guid
	 * for the first device.
	 */
	private @Nullable String name;

	/**
	 * Node GUID of the device in hex as ibv_devices prints it, e.g. 0x505400fffe727865.
	 * Alternative to name.
	 */
	private @Nullable String guid;

	/** Port whose state the health indicator reports (1-based). */
	private int port = 1;

	public @Nullable String getName() {
		return name;
	}

	public void setName(@Nullable String name) {
		this.name = name;
	}

	public @Nullable String getGuid() {
		return guid;
	}

	public void setGuid(@Nullable String guid) {
		this.guid = guid;
	}

	public int getPort() {
		return port;
	}

	public void setPort(int port) {
		this.port = port;
	}

}
