package dev.rdma.sample;

import java.time.Duration;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The ping-pong's settings.
 *
 * @param messages number of round trips (one send, one receive each)
 * @param messageSize payload bytes per message (at least 16)
 * @param timeout how long the whole run may take
 * @param stopAfter two-process server: stop (exit 0) once this many echoes were
 * acknowledged, to restart the server mid-run; 0: run to the last message
 * @param reconnectAfter two-process client: close its connection right after sending the
 * message of this sequence number and open it again (its echo may be lost: the client
 * resends it); 0: never
 */
@ConfigurationProperties("sample")
public record SampleProperties(int messages, int messageSize, Duration timeout, int stopAfter, int reconnectAfter) {

	public SampleProperties {
		if (messages < 1) {
			throw new IllegalArgumentException("sample.messages must be >= 1, got " + messages);
		}
		if (messageSize < 16 || messageSize > 4096) {
			throw new IllegalArgumentException("sample.message-size must be 16..4096, got " + messageSize);
		}
		if (stopAfter < 0 || reconnectAfter < 0) {
			throw new IllegalArgumentException("sample.stop-after and sample.reconnect-after must be >= 0, got "
					+ stopAfter + ", " + reconnectAfter);
		}
	}
}
