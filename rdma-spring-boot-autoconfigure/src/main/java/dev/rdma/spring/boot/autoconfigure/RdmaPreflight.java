package dev.rdma.spring.boot.autoconfigure;

import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.core.env.Environment;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.Device;
import dev.rdma.verbs.DeviceFiles;
import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.LockedMemory;
import dev.rdma.verbs.RdmaException;

/**
 * The deployment checks of {@link RdmaResources}, made once more before the application
 * context refreshes ({@link RdmaStartupChecks}), so that a service started with too
 * little locked memory or without access to its device files fails within seconds of the
 * JVM's start, before any configuration class is parsed or bean created, with the same
 * message as the check at the first device's open:
 * <ul>
 * <li>the locked memory the configuration pins against {@code RLIMIT_MEMLOCK}
 * ({@link PinnedMemory#check});</li>
 * <li>each configured device's uverbs file, which the process must be able to open
 * ({@link DeviceFiles#isClosedToThisProcess}).</li>
 * </ul>
 * It does nothing when no {@code rdma.*} property is set, when the RDMA
 * auto-configuration is going to back off (no device and {@code rdma.required} not set)
 * or is excluded through {@code spring.autoconfigure.exclude}, and when the properties do
 * not bind or are not valid: the auto-configuration then reports them as it always does.
 * Everything it finds would fail later, at the first device's open, with the same
 * message; it only fails sooner.
 */
final class RdmaPreflight {

	private RdmaPreflight() {
	}

	/**
	 * Checks the configuration of {@code environment} against {@code limit} and the
	 * device files.
	 * @throws RdmaConfigurationException as the first device's open would
	 */
	static void check(Environment environment, Supplier<LockedMemory.Limit> limit) {
		if (!RdmaPropertiesBinding.configured(environment) || excluded(environment)) {
			return;
		}
		boolean required = Boolean.parseBoolean(environment.getProperty("rdma.required", "false").trim());
		if (!required && OnRdmaAvailableCondition.problem() != null) {
			return;
		}
		RdmaProperties properties;
		PinnedMemory pinned;
		try {
			properties = RdmaPropertiesBinding.bindStrictly(environment);
			// an invalid value (max-peers out of range, ...) is the auto-configuration's
			// to
			// report, naming its property: the pinned memory of invalid values would
			// name another
			RdmaPropertiesValidator.validate(properties, name -> false);
			pinned = PinnedMemory.of(properties);
		}
		catch (RuntimeException ex) {
			return; // reported by the auto-configuration, with its own message
		}
		pinned.check(limit.get());
		checkDeviceFiles(properties);
	}

	/**
	 * Whether {@code spring.autoconfigure.exclude} names the RDMA auto-configuration, in
	 * any form Boot binds it from (a comma-separated value, or a YAML list: {@code [0]},
	 * {@code [1]}, ...).
	 */
	private static boolean excluded(Environment environment) {
		return Binder.get(environment)
			.bind("spring.autoconfigure.exclude", Bindable.listOf(String.class))
			.orElse(List.of())
			.stream()
			.map(String::trim)
			.anyMatch(RdmaAutoConfiguration.class.getName()::equals);
	}

	private static void checkDeviceFiles(RdmaProperties properties) {
		if (properties.getDevices().isEmpty()) {
			return;
		}
		try (DeviceList list = DeviceList.open()) {
			properties.getDevices().forEach((key, config) -> {
				String path = RdmaPropertiesValidator.DEVICES + key;
				Optional<Device> device = find(list, config);
				if (device.isPresent() && DeviceFiles.isClosedToThisProcess(DeviceFiles.uverbs(device.get().name()))) {
					throw RdmaResources.noAccess(path, device.get().name(), null);
				}
			});
		}
		catch (RdmaException ex) {
			// listing failed: the first device's open reports it
		}
	}

	/** The device {@link RdmaResources#openDevice} would open, if it is there. */
	private static Optional<Device> find(DeviceList list, DeviceProperties config) {
		if (config.getGuid() != null) {
			try {
				return list.byGuid(RdmaPropertiesValidator.parseGuid("guid", config.getGuid()));
			}
			catch (RuntimeException ex) {
				return Optional.empty();
			}
		}
		if (config.getName() != null) {
			return list.byName(config.getName());
		}
		return list.devices().stream().findFirst();
	}

}
