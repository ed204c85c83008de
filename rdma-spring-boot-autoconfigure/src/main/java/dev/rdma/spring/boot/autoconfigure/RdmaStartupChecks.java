package dev.rdma.spring.boot.autoconfigure;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.SpringBootVersion;
import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.util.ClassUtils;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.LockedMemory;

/**
 * Checks made before any bean exists (registered in {@code META-INF/spring.factories}, so
 * that they run on every Spring Boot version, before the auto-configurations are even
 * looked at):
 * <ul>
 * <li>the Spring Boot version: the starter needs Spring Boot 4.0 or 4.1. On Boot 3.x it
 * would half-work (its health indicator needs Boot 4's {@code spring-boot-health}), so
 * startup fails with a message naming the required version instead;</li>
 * <li>native access: when the JVM does not enable native access for the module of the
 * bindings, one WARN line says exactly what to add (the JDK's own warning follows at the
 * first restricted call, and a later JDK will refuse the call);</li>
 * <li>on Spring Boot 4, the deployment checks of {@code RdmaPreflight} (locked memory,
 * device files), so that a service that cannot run fails before the context
 * refreshes.</li>
 * </ul>
 * Uses only types that Spring Boot 3.x has too, so that it can fail there with its
 * message.
 */
public class RdmaStartupChecks implements ApplicationContextInitializer<ConfigurableApplicationContext> {

	/** The Spring Boot versions the starter is built and tested for. */
	public static final String SUPPORTED_BOOT_VERSIONS = "4.0.x and 4.1.x";

	private static final Log logger = LogFactory.getLog(RdmaStartupChecks.class);

	/** One native-access warning per JVM, whatever the number of application contexts. */
	private static final AtomicBoolean nativeAccessWarned = new AtomicBoolean();

	private final Supplier<LockedMemory.Limit> lockedMemoryLimit;

	/** The checks against this process's locked-memory limit. */
	public RdmaStartupChecks() {
		this(LockedMemory::current);
	}

	RdmaStartupChecks(Supplier<LockedMemory.Limit> lockedMemoryLimit) {
		this.lockedMemoryLimit = lockedMemoryLimit;
	}

	@Override
	public void initialize(ConfigurableApplicationContext applicationContext) {
		checkBootVersion(bootVersion());
		String advice = nativeAccessAdvice(Context.class.getModule());
		if (advice != null && nativeAccessWarned.compareAndSet(false, true)) {
			logger.warn(advice);
		}
		RdmaPreflight.check(applicationContext.getEnvironment(), this.lockedMemoryLimit);
	}

	/**
	 * The running Spring Boot version: from its jar's manifest, or, when the manifest
	 * does not say (classes not from a jar), "4" when a class that Boot 4 added is
	 * present and "3" otherwise.
	 */
	static String bootVersion() {
		String version = SpringBootVersion.getVersion();
		if (version != null) {
			return version;
		}
		return ClassUtils.isPresent("org.springframework.boot.EnvironmentPostProcessor",
				RdmaStartupChecks.class.getClassLoader()) ? "4" : "3";
	}

	/**
	 * Fails on a Spring Boot version other than 4.x.
	 * @param version the running Spring Boot version, such as {@code 3.5.16}
	 * @throws IllegalStateException naming the running and the required version
	 */
	static void checkBootVersion(String version) {
		String major = version.contains(".") ? version.substring(0, version.indexOf('.')) : version;
		if (!major.equals("4")) {
			throw new IllegalStateException("rdma-spring-boot-starter needs Spring Boot " + SUPPORTED_BOOT_VERSIONS
					+ ", but this application runs Spring Boot " + version
					+ ". Use spring-boot-starter-parent (or the spring-boot-dependencies BOM) 4.0.x or 4.1.x.");
		}
	}

	/**
	 * What to add to enable native access for the bindings' module, or null when it is
	 * enabled.
	 * @param bindings the module of the bindings ({@code dev.rdma.verbs} on the module
	 * path, an unnamed module on the class path or in an executable jar)
	 * @return one line naming the flag or the manifest entry, or null
	 */
	static @Nullable String nativeAccessAdvice(Module bindings) {
		if (bindings.isNativeAccessEnabled()) {
			return null;
		}
		if (bindings.isNamed()) {
			return "Native access is not enabled for module " + bindings.getName()
					+ " (RDMA bindings, java.lang.foreign): start java with --enable-native-access="
					+ bindings.getName();
		}
		return "Native access is not enabled for the RDMA bindings (java.lang.foreign, class path): add "
				+ "'Enable-Native-Access: ALL-UNNAMED' to the executable jar's manifest, or start java with "
				+ "--enable-native-access=ALL-UNNAMED (spring-boot:run: <jvmArguments>, tests: surefire <argLine>)";
	}

}
