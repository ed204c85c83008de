package dev.rdma.benchmarks.starter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static dev.rdma.benchmarks.starter.StarterBench.env;

/**
 * The retransmission counters of the two Soft-RoCE devices ({@code RDMA_DEVICE_A/_B},
 * {@code /sys/class/infiniband/<device>/ports/1/hw_counters}), read at a phase's
 * boundaries of {@link XstreamBench} (outside the measured allocation): RC's go-back-N
 * after a packet rxe lost shows as {@code completer_retry_err} and {@code rcvd_seq_err}
 * on the requester, {@code duplicate_request} and {@code out_of_seq_request} on the
 * responder, and {@code sent_pkts} gives the packets they are a share of; a receiver
 * without a posted receive buffer answers RNR ({@code send_rnr_err} on the responder,
 * {@code rcvd_rnr_err} on the requester, which resends after the RNR timer). A counter
 * that cannot be read counts -1.
 */
final class Retransmissions {

	private static final String[] COUNTERS = { "sent_pkts", "completer_retry_err", "rcvd_seq_err", "duplicate_request",
			"out_of_seq_request", "rcvd_rnr_err", "send_rnr_err" };

	private Retransmissions() {
	}

	/** Device A's counters, then device B's, in the order of {@link #COUNTERS}. */
	static long[] read() {
		String[] devices = { env("RDMA_DEVICE_A"), env("RDMA_DEVICE_B") };
		long[] values = new long[devices.length * COUNTERS.length];
		for (int d = 0; d < devices.length; d++) {
			for (int c = 0; c < COUNTERS.length; c++) {
				Path file = Path.of("/sys/class/infiniband", devices[d], "ports/1/hw_counters", COUNTERS[c]);
				try {
					values[d * COUNTERS.length + c] = Long.parseLong(Files.readString(file).trim());
				}
				catch (IOException | NumberFormatException ex) {
					values[d * COUNTERS.length + c] = -1;
				}
			}
		}
		return values;
	}

	/** What grew between two readings, e.g. {@code rxeA/sent_pkts +1200 ...}. */
	static String describe(long[] before, long[] after) {
		String[] devices = { env("RDMA_DEVICE_A"), env("RDMA_DEVICE_B") };
		StringBuilder out = new StringBuilder("hw_counters:");
		for (int i = 0; i < before.length; i++) {
			if (before[i] >= 0 && after[i] >= 0 && after[i] != before[i]) {
				out.append(' ')
					.append(devices[i / COUNTERS.length])
					.append('/')
					.append(COUNTERS[i % COUNTERS.length])
					.append(" +")
					.append(after[i] - before[i]);
			}
		}
		return out.toString();
	}

}
