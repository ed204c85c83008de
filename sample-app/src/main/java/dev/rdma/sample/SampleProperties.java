package dev.rdma.sample;

import java.time.Duration;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The ping-pong's settings.
 *
 * @param messages number of round trips (one send, one receive each)
 * @param messageSize payload bytes per message (at least 16)
 * @param timeout how long the whole run may take
 */
@ConfigurationProperties("sample")
public record SampleProperties(int messages, int messageSize, Duration timeout) {

	public SampleProperties {
		if (messages < 1) {
			throw new IllegalArgumentException("sample.messages must be >= 1, got " + messages);
		}
		if (messageSize < 16 || messageSize > 4096) {
			throw new IllegalArgumentException("sample.message-size must be 16..4096, got " + messageSize);
		}
	}
}
