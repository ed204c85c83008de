package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.LockedMemory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * docs/deployment.md and the device tier's unprivileged runs agree: both take their
 * settings from {@code scripts/lib/deployment.env}. The document's Dockerfile installs
 * its packages and starts java with its JVM flags as its user; {@code docker run}, the
 * systemd unit, limits.conf and the pod spec give its memlock limit; {@code docker run}
 * passes its device files. {@code scripts/lib/device-tests.sh} sources the file and
 * applies every setting (prlimit, setpriv, chmod, the packages). The worked example's
 * total is {@link PinnedMemory}'s.
 */
class DeploymentDocsTests {

	private static final Path ENV = Path.of("..", "scripts", "lib", "deployment.env");

	private static final Path DOCUMENT = Path.of("..", "docs", "deployment.md");

	private static final Path DEVICE_TESTS = Path.of("..", "scripts", "lib", "device-tests.sh");

	static Map<String, String> settings() throws IOException {
		Map<String, String> settings = new LinkedHashMap<>();
		Matcher m = Pattern.compile("(?m)^(DEPLOY_\\w+)=\"?([^\"\\n]*)\"?$").matcher(Files.readString(ENV));
		while (m.find()) {
			settings.put(m.group(1), m.group(2));
		}
		return settings;
	}

	@Test
	void theDocumentShowsTheSettingsTheDeviceTierRunsWith() throws IOException {
		Map<String, String> s = settings();
		assertThat(s).containsOnlyKeys("DEPLOY_PACKAGES", "DEPLOY_JVM_FLAGS", "DEPLOY_USER", "DEPLOY_MEMLOCK_BYTES",
				"DEPLOY_DEVICE_FILES", "DEPLOY_DEVICE_MODE");
		String doc = Files.readString(DOCUMENT);
		String packages = s.get("DEPLOY_PACKAGES");
		assertThat(packages).isEqualTo("libibverbs1 ibverbs-providers librdmacm1");
		assertThat(doc).contains("FROM eclipse-temurin:25-jre",
				"apt-get install -y --no-install-recommends " + packages, "USER " + s.get("DEPLOY_USER"),
				"User=" + s.get("DEPLOY_USER"));
		String jvm = s.get("DEPLOY_JVM_FLAGS");
		StringBuilder entrypoint = new StringBuilder("ENTRYPOINT [\"java\"");
		for (String flag : jvm.split(" ")) {
			entrypoint.append(", \"").append(flag).append('"');
		}
		assertThat(doc).contains(entrypoint + ", \"-jar\", \"/app/app.jar\"]",
				"ExecStart=/usr/bin/java " + jvm + " -jar");
		long memlock = Long.parseLong(s.get("DEPLOY_MEMLOCK_BYTES"));
		assertThat(doc).contains("--ulimit memlock=" + memlock + ":" + memlock, "LimitMEMLOCK=" + memlock,
				s.get("DEPLOY_USER") + "  -  memlock  " + memlock / 1024, "prlimit --memlock=" + memlock,
				"LimitMEMLOCK=" + memlock + " or infinity");
		for (String file : s.get("DEPLOY_DEVICE_FILES").split(" ")) {
			assertThat(doc).contains("--device=" + file.replace("*", "0"));
		}
		assertThat(doc).contains("mode `" + s.get("DEPLOY_DEVICE_MODE") + "`", "`" + jvm + "`", "`" + packages + "`");
	}

	@Test
	void theDeviceTierAppliesEverySetting() throws IOException {
		String script = Files.readString(DEVICE_TESTS);
		assertThat(script).contains(". \"$(dirname \"$0\")/deployment.env\"",
				"prlimit --memlock=$1:$1 setpriv --reuid=$DEPLOY_USER", "service_prefix \"$DEPLOY_MEMLOCK_BYTES\"",
				"chmod \"$DEPLOY_DEVICE_MODE\" $DEPLOY_DEVICE_FILES", "dpkg-query -W $DEPLOY_PACKAGES",
				"$SERVICE_PREFIX \"$JAVA_HOME/bin/java\"", "export FRESH_APP_PREFIX=$SERVICE_PREFIX",
				"/deployment-failures.sh\" \"${deploy_run[@]}\"");
		// the failing starts: as the same user, with the same JVM flags
		assertThat(Files.readString(DEVICE_TESTS.resolveSibling("deployment-failures.sh"))).contains(
				". \"$(dirname \"$0\")/deployment.env\"", "prlimit --memlock=$1:$1 setpriv --reuid=$DEPLOY_USER",
				"$DEPLOY_JVM_FLAGS", "fail_start device-files \"$DEPLOY_MEMLOCK_BYTES\"",
				"chmod \"$DEPLOY_DEVICE_MODE\" \"${uverbs[@]}\"");
		assertThat(Files.readString(Path.of("..", "scripts", "lib", "fresh-app.sh")))
			.contains("${FRESH_APP_PREFIX:-} \"$java\"");
	}

	/**
	 * The pod spec (fenced {@code yml}: not rdma properties, and no Kubernetes here)
	 * parses and asks for IPC_LOCK, a device plugin's resource and a non-root user.
	 */
	@Test
	@SuppressWarnings("unchecked")
	void thePodSpecParsesAndAsksForTheCapabilityAndTheDevice() throws IOException {
		String doc = Files.readString(DOCUMENT);
		Matcher block = Pattern.compile("(?s)```yml\n(.*?)```").matcher(doc);
		assertThat(block.find()).as("the pod spec").isTrue();
		Map<String, Object> pod = new org.yaml.snakeyaml.Yaml().load(block.group(1));
		assertThat(pod).containsEntry("kind", "Pod");
		Map<String, Object> container = ((java.util.List<Map<String, Object>>) ((Map<String, Object>) pod.get("spec"))
			.get("containers")).get(0);
		Map<String, Object> security = (Map<String, Object>) container.get("securityContext");
		assertThat(security).containsEntry("runAsNonRoot", true);
		assertThat((Map<String, Object>) security.get("capabilities")).containsEntry("add",
				java.util.List.of("IPC_LOCK"));
		Map<String, Object> limits = (Map<String, Object>) ((Map<String, Object>) container.get("resources"))
			.get("limits");
		assertThat(limits).containsKey("rdma/hca_shared_devices_a");
	}

	@Test
	void theWorkedExampleIsWhatTheStarterComputes() throws IOException {
		PinnedMemory example = PinnedMemory.of(PinnedMemoryTests.server(8, "16384"));
		String doc = Files.readString(DOCUMENT);
		assertThat(doc).contains("total **" + LockedMemory.bytes(example.total()) + " (about");
		example.lines(new LockedMemory.Limit(8L << 20, 8L << 20, false))
			.forEach(line -> assertThat(doc).contains(line));
	}

}
