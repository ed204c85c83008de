package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/** A completion event channel ({@code ibv_create_comp_channel}). */
@ConfigurationPropertiesSource
public class ChannelProperties {

	/**
	 * Key of the device (under rdma.devices) the channel belongs to. May be omitted when
	 * exactly one device is configured.
	 */
	private @Nullable String device;

	/**
	 * Whether the channel fd is non-blocking. Must be true: pollers wait with poll(2) and
	 * a timeout so that shutdown never hangs inside read(2).
	 */
	private boolean nonBlocking = true;

	public @Nullable String getDevice() {
		return device;
	}

	public void setDevice(@Nullable String device) {
		this.device = device;
	}

	public boolean isNonBlocking() {
		return nonBlocking;
	}

	public void setNonBlocking(boolean nonBlocking) {
		this.nonBlocking = nonBlocking;
	}

}
