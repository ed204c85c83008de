package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/**
 * A server's shared receive queue ({@code rdma.connections.<name>.shared-receive-queue}):
 * every peer's queue pair receives from one SRQ whose buffers the server owns, so the
 * receive memory no longer grows with {@code max-peers}.
 */
@ConfigurationPropertiesSource
public class SharedReceiveQueueProperties {

	/**
	 * Server: whether every peer's queue pair receives from one shared receive queue
	 * (ibv_create_srq) of depth buffers of message-size bytes instead of receive-depth
	 * buffers of its own; receive-depth and receive-buffers then do not apply. A client
	 * refuses it.
	 */
	private boolean enabled;

	/**
	 * Receive buffers of the shared receive queue (its max_wr), shared by all peers: what
	 * every peer may have in flight towards the server at once, together.
	 */
	private int depth = 512;

	/**
	 * Low-water mark: fewer posted receives than this raise SRQ_LIMIT_REACHED, which
	 * refills the queue with buffers whose post failed and arms the limit again; 0 = no
	 * limit. Omitted = a quarter of depth.
	 */
	private @Nullable Integer limit;

	public boolean isEnabled() {
		return enabled;
	}

	public void setEnabled(boolean enabled) {
		this.enabled = enabled;
	}

	public int getDepth() {
		return depth;
	}

	public void setDepth(int depth) {
		this.depth = depth;
	}

	public @Nullable Integer getLimit() {
		return limit;
	}

	public void setLimit(@Nullable Integer limit) {
		this.limit = limit;
	}

	/** The limit in effect: the configured one, or a quarter of depth. */
	public int effectiveLimit() {
		return (limit != null) ? limit : depth / 4;
	}

}
