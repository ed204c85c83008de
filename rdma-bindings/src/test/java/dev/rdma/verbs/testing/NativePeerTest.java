package dev.rdma.verbs.testing;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The device tests' C-peer runner on the host: a peer's stdout arrives line by line while
 * it runs, and a peer that hangs is described before it is killed.
 */
class NativePeerTest {

	@Test
	void aHangingPeersOutputArrivesWhileItRunsAndItIsDescribedBeforeItIsKilled() {
		// awk writes through stdio: to a pipe its line would stay in the buffer until
		// exit
		try (NativePeer peer = NativePeer.start("awk", "BEGIN { print \"first line\"; while (1) {} }");
				NativePeer other = NativePeer.start("sleep", "60")) {
			peer.awaitOutput("first line", Duration.ofSeconds(30));
			long pid = peer.pid();
			assertThatThrownBy(() -> peer.awaitExit(Duration.ofMillis(300))).isInstanceOf(AssertionError.class)
				.hasMessageContaining("did not exit within PT0.3S; killed. Output:\nfirst line")
				.hasMessageContaining("-- peers still running:")
				.hasMessageContaining("'awk BEGIN")
				.hasMessageContaining("'sleep 60' (pid " + other.pid() + ")")
				.hasMessageContaining("thread " + pid + ": " + pid + " (awk) R")
				.hasMessageContaining("wchan: ")
				.hasMessageContaining("-- rdma resource show cm_id:")
				.hasMessageContaining("-- ip neigh show:");
			assertThat(peer.isAlive()).isFalse();
			assertThat(other.isAlive()).isTrue();
		}
	}

}
