package dev.rdma.sample;

import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.NativeObjects;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The sample on this host: without an RDMA device it must refuse to start with a message
 * naming rdma.required (the sample runs on rxe0 in the device tier, see scripts/test);
 * with one, a short ping-pong must deliver everything.
 */
class SampleApplicationTests {

	private static boolean hasDevice() {
		try (DeviceList list = DeviceList.open()) {
			return !list.devices().isEmpty();
		}
	}

	@Test
	void failsClearlyWithoutADeviceOrDeliversEveryMessageWithOne() {
		SpringApplication app = new SpringApplication(SampleApplication.class);
		app.setWebApplicationType(WebApplicationType.NONE);
		long open = NativeObjects.open();
		if (!hasDevice()) {
			assertThatThrownBy(() -> app.run("--sample.messages=10"))
				.hasStackTraceContaining("rdma.required=true but no RDMA device found");
		}
		else {
			try (ConfigurableApplicationContext context = app.run("--sample.messages=200")) {
				assertThat(SpringApplication.exit(context)).isZero();
			}
		}
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@ParameterizedTest
	@ValueSource(strings = { "server", "client" })
	void twoProcessProfilesBindAndValidateTheirConnection(String profile) {
		org.junit.jupiter.api.Assumptions.assumeFalse(hasDevice(), "this host has a device: the device tier runs it");
		SpringApplication app = new SpringApplication(SampleApplication.class);
		app.setWebApplicationType(WebApplicationType.NONE);
		app.setAdditionalProfiles(profile);
		// the yml of the profile passes every device-less check (rdma.connections
		// included): what stops it here is the missing device only
		assertThatThrownBy(() -> app.run("--sample.messages=10"))
			.hasStackTraceContaining("rdma.required=true but no RDMA device found");
	}

}
