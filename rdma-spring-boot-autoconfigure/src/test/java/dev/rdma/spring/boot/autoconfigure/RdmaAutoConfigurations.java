package dev.rdma.spring.boot.autoconfigure;

import java.util.List;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.annotation.ImportCandidates;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.util.ClassUtils;

/**
 * The starter's auto-configurations exactly as Spring Boot finds them: the classes listed
 * in this module's
 * {@code META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports},
 * in Boot's order.
 */
public final class RdmaAutoConfigurations {

	private RdmaAutoConfigurations() {
	}

	/** The names listed in the imports file(s) of the starter. */
	public static List<String> names() {
		return ImportCandidates.load(AutoConfiguration.class, RdmaAutoConfigurations.class.getClassLoader())
			.getCandidates()
			.stream()
			.filter(name -> name.startsWith("dev.rdma."))
			.toList();
	}

	/**
	 * Every auto-configuration of the starter, for an {@code ApplicationContextRunner}.
	 */
	public static AutoConfigurations all() {
		return AutoConfigurations.of(names().stream()
			.map(name -> ClassUtils.resolveClassName(name, RdmaAutoConfigurations.class.getClassLoader()))
			.toArray(Class<?>[]::new));
	}

	/**
	 * A runner of {@link #all()} that requires RDMA on {@code device} (its port 1) as
	 * {@code rdma.devices.nic0}: the start of the device tests' applications.
	 */
	public static ApplicationContextRunner onDevice(String device) {
		return new ApplicationContextRunner().withConfiguration(all())
			.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=" + device, "rdma.devices.nic0.port=1");
	}

}
