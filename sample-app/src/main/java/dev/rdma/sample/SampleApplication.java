package dev.rdma.sample;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;

/**
 * The sample: opens the first RDMA device from application.yml, connects an RC QP to
 * itself, and runs a ping-pong of {@code sample.messages} messages whose completions
 * reach {@link PingPong}'s {@code @RdmaCompletionListener} methods. Exits 0 only when
 * every message arrived intact.
 */
@SpringBootApplication
@EnableConfigurationProperties(SampleProperties.class)
public class SampleApplication {

	public static void main(String[] args) {
		System.exit(SpringApplication.exit(SpringApplication.run(SampleApplication.class, args)));
	}

}
