package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Placement on the device (rxe0 in the 2-vCPU test VM): a poller group pinned with
 * {@code rdma.pollers.<group>.cpus=1} runs its thread only on CPU 1
 * ({@code Cpus_allowed_list} of its {@code /proc/self/task/<tid>/status}) while the rest
 * of the JVM stays unpinned; the startup report shows the pinning, the device's NUMA node
 * ("unknown" on rxe) and the locked-memory total; a list that is not one, or names a CPU
 * the VM does not have, fails startup naming the property. Runs in the lane's JVM.
 */
@Tag(DeviceTestSupport.TAG)
class PollerPinningDeviceTest {

	private static ApplicationContextRunner runner(String cpus) {
		return new ApplicationContextRunner().withConfiguration(RdmaAutoConfigurations.all())
			.withUserConfiguration(App.class)
			.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=" + DeviceTestSupport.deviceName(),
					"rdma.channels.ev0.device=nic0", "rdma.completion-queues.q0.entries=64",
					"rdma.completion-queues.q0.channel=ev0", "rdma.completion-queues.q0.poller=pinned",
					"rdma.pollers.pinned.threads=1", "rdma.pollers.pinned.cpus=" + cpus);
	}

	@Test
	void aGroupPinnedToCpuOneRunsOnlyThere() {
		String process = cpusAllowed(Path.of("/proc/self/status"));
		assertThat(process).as("the VM has 2 vCPUs").isEqualTo("0-1");
		runner("1").run(context -> {
			assertThat(context).hasNotFailed();
			Path[] status = new Path[1];
			DeviceTestSupport.await(Duration.ofSeconds(30),
					() -> (status[0] = pollerStatus()) != null && "1".equals(cpusAllowed(status[0])),
					"the thread of poller group 'pinned' on CPU 1");
			assertThat(cpusAllowed(status[0])).isEqualTo("1");
			// the rest of the JVM is not pinned
			assertThat(cpusAllowed(Path.of("/proc/thread-self/status"))).isEqualTo("0-1");
			List<String> report = context.getBean(RdmaBeanRegistrar.REPORT_BEAN_NAME, RdmaStartupReport.class).lines();
			assertThat(report).contains("RDMA poller group 'pinned': threads pinned to CPUs 1");
			assertThat(report).anySatisfy(line -> assertThat(line).startsWith("RDMA device 'nic0' (")
				.endsWith("): NUMA node unknown, local CPUs unknown"));
			assertThat(report)
				.anySatisfy(line -> assertThat(line).startsWith("RDMA locked memory: 8 KiB in total at most, limit "));
		});
	}

	@Test
	void aBadListOrACpuTheVmLacksFailsStartupNamingTheProperty() {
		runner("1-0").run(context -> {
			assertThat(context).hasFailed();
			RdmaConfigurationException ex = rootCause(context.getStartupFailure());
			assertThat(ex.property()).isEqualTo("rdma.pollers.pinned.cpus");
			assertThat(ex.reason()).isEqualTo(
					"rdma.pollers.pinned.cpus=1-0 is not a Linux CPU list: '1-0' is a range " + "from high to low");
		});
		runner("0,7").run(context -> {
			assertThat(context).hasFailed();
			RdmaConfigurationException ex = rootCause(context.getStartupFailure());
			assertThat(ex.reason()).isEqualTo("rdma.pollers.pinned.cpus=0,7 names CPUs 7 this process may not run on "
					+ "(Cpus_allowed_list 0-1)");
		});
	}

	private static RdmaConfigurationException rootCause(Throwable failure) {
		for (Throwable t = failure; t != null; t = t.getCause()) {
			if (t instanceof RdmaConfigurationException rce) {
				return rce;
			}
		}
		throw new AssertionError("no RdmaConfigurationException in " + failure, failure);
	}

	/** The status file of the group's thread (comm "rdma-poller-pin", 15 characters). */
	private static @Nullable Path pollerStatus() {
		try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
			for (Path task : tasks.toList()) {
				try {
					if (Files.readString(task.resolve("comm")).trim().startsWith("rdma-poller-pin")) {
						return task.resolve("status");
					}
				}
				catch (IOException gone) {
					// the thread ended
				}
			}
			return null;
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	private static String cpusAllowed(Path status) {
		try {
			for (String line : Files.readAllLines(status)) {
				if (line.startsWith("Cpus_allowed_list:")) {
					return line.substring("Cpus_allowed_list:".length()).trim();
				}
			}
			throw new AssertionError("no Cpus_allowed_list in " + status);
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class App {

		@Bean
		Listener listener() {
			return new Listener();
		}

	}

	static final class Listener {

		@RdmaCompletionListener(queue = "q0")
		void onCompletion(WorkCompletion completion) {
			// the queue only needs a listener for its group's thread to start
		}

	}

}
