package dev.rdma.spring.boot.autoconfigure;

import java.util.List;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.autoconfigure.condition.ConditionMessage;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.core.type.AnnotatedTypeMetadata;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.Device;
import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.RdmaException;

/**
 * Matches when libibverbs loads and lists at least one RDMA device, or when
 * {@code rdma.required=true} (then the auto-configuration fails startup itself, with an
 * analysed {@link RdmaConfigurationException}, instead of backing off).
 */
class OnRdmaAvailableCondition extends SpringBootCondition {

	private static final Log logger = LogFactory.getLog(RdmaAutoConfiguration.class);

	@Override
	public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
		// reads "RDMA is not available: no RDMA device found (...)" in the condition
		// report
		ConditionMessage.Builder message = ConditionMessage.forCondition("RDMA");
		if (required(context)) {
			return ConditionOutcome
				.match(message.because("is required (rdma.required=true: startup fails when it is missing)"));
		}
		String problem = problem();
		if (problem != null) {
			logger.info("RDMA auto-configuration backs off: " + problem
					+ " (set rdma.required=true to fail startup instead)");
			return ConditionOutcome.noMatch(message.because("is not available: " + problem));
		}
		return ConditionOutcome.match(message.because("is available: found RDMA device(s) " + devices()));
	}

	/**
	 * rdma.required as a boolean; a value that is not one fails with a message naming the
	 * property.
	 */
	private static boolean required(ConditionContext context) {
		try {
			return context.getEnvironment().getProperty("rdma.required", Boolean.class, false);
		}
		catch (RuntimeException ex) {
			String value = context.getEnvironment().getProperty("rdma.required");
			throw new RdmaConfigurationException("rdma.required", "rdma.required=" + value + " is not a boolean",
					"Set rdma.required to true (fail startup without RDMA) or false (back off).", ex);
		}
	}

	/** Why RDMA cannot be used on this host, or null when it can. */
	static @Nullable String problem() {
		if (!Rdma.isAvailable()) {
			return "libibverbs is not available: " + Rdma.unavailableReason();
		}
		try {
			List<String> devices = devices();
			return devices.isEmpty() ? "no RDMA device found (ibv_get_device_list listed none)" : null;
		}
		catch (RdmaException ex) {
			return "listing RDMA devices failed: " + ex.getMessage();
		}
	}

	private static List<String> devices() {
		try (DeviceList list = DeviceList.open()) {
			return list.devices().stream().map(Device::name).toList();
		}
	}

}
