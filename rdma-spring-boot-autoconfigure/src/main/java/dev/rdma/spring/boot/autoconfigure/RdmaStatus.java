package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.ListableBeanFactory;

/**
 * Whether the RDMA auto-configuration is active, and if not why it backed off. Always a
 * bean ({@value #BEAN_NAME}), with or without RDMA, so an application that runs with and
 * without RDMA can ask it (or inject {@code ObjectProvider<Context>} and the like, which
 * are empty when RDMA backed off).
 *
 * <pre>
 * if (!status.isActive()) {
 *     log.info("running without RDMA: " + status.reason());
 * }
 * </pre>
 */
public final class RdmaStatus {

	/** Bean name of the status. */
	public static final String BEAN_NAME = "rdmaStatus";

	private final ListableBeanFactory beanFactory;

	private final @Nullable String problem;

	private final boolean configured;

	RdmaStatus(ListableBeanFactory beanFactory, @Nullable String problem, boolean configured) {
		this.beanFactory = beanFactory;
		this.problem = problem;
		this.configured = configured;
	}

	/**
	 * Whether the RDMA beans (devices, channels, queues, listeners) exist in this
	 * application.
	 */
	public boolean isActive() {
		return beanFactory.containsBeanDefinition(RdmaResources.BEAN_NAME);
	}

	/**
	 * Why the RDMA auto-configuration backed off (e.g. "no RDMA device found"), null when
	 * it is active.
	 */
	public @Nullable String reason() {
		if (isActive()) {
			return null;
		}
		return problem != null ? problem
				: "RdmaAutoConfiguration is excluded or did not match (see the condition evaluation report, --debug)";
	}

	/**
	 * Whether any {@code rdma.*} property is set (then it was checked at startup, with or
	 * without a device).
	 */
	public boolean isConfigured() {
		return configured;
	}

	@Override
	public String toString() {
		return isActive() ? "RDMA active" : "RDMA backed off: " + reason();
	}

}
