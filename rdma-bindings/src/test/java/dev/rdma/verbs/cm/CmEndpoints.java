package dev.rdma.verbs.cm;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;

import org.junit.jupiter.api.BeforeEach;

import dev.rdma.verbs.testing.DeviceTestSupport;

/**
 * The opening the rdma_cm device tests share: the two endpoints of the tier
 * ({@link CmSide.Endpoint#pair()}, the server's first) and a fresh port, chosen before
 * each test, and the bound of each step.
 */
abstract class CmEndpoints {

	static final Duration STEP = Duration.ofSeconds(30);

	CmSide.Endpoint serverEnd;

	CmSide.Endpoint clientEnd;

	int port;

	@BeforeEach
	void endpoints() {
		CmSide.Endpoint[] pair = CmSide.Endpoint.pair();
		serverEnd = pair[0];
		clientEnd = pair[1];
		port = DeviceTestSupport.randomPort();
	}

	/** The server's address: its endpoint's IPv4 address and the test's port. */
	InetSocketAddress server() throws Exception {
		return new InetSocketAddress(InetAddress.getByName(serverEnd.ipv4()), port);
	}

	/** The client's bind address: its endpoint's IPv4 address, any port. */
	InetSocketAddress client() throws Exception {
		return new InetSocketAddress(InetAddress.getByName(clientEnd.ipv4()), 0);
	}

}
