package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;

/** A client's back-off between connection attempts. */
@ConfigurationPropertiesSource
public class RetryProperties {

	/** Wait after the first failed attempt. */
	private Duration initialInterval = Duration.ofMillis(100);

	/** Growth of the wait after each further failed attempt. */
	private double multiplier = 2.0;

	/** Longest wait between two attempts. */
	private Duration maxInterval = Duration.ofSeconds(5);

	/** Attempts before the client gives up; 0 = it never does. */
	private int maxAttempts = 0;

	public Duration getInitialInterval() {
		return initialInterval;
	}

	public void setInitialInterval(Duration initialInterval) {
		this.initialInterval = initialInterval;
	}

	public double getMultiplier() {
		return multiplier;
	}

	public void setMultiplier(double multiplier) {
		this.multiplier = multiplier;
	}

	public Duration getMaxInterval() {
		return maxInterval;
	}

	public void setMaxInterval(Duration maxInterval) {
		this.maxInterval = maxInterval;
	}

	public int getMaxAttempts() {
		return maxAttempts;
	}

	public void setMaxAttempts(int maxAttempts) {
		this.maxAttempts = maxAttempts;
	}

}
