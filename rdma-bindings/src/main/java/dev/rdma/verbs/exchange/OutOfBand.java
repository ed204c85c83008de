package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.function.Function;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.GidEntry;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.VerbsException;

/**
 * Connects queue pairs without a connection manager: each side's endpoint record goes
 * over one TCP connection in {@code ibv_rc_pingpong}'s format ({@link PingpongWire}), and
 * an RC queue pair is then moved from RESET through INIT, RTR and RTS with the peer's
 * QPN, PSN, LID and GID. Interoperates with {@code ibv_rc_pingpong} in both roles.
 *
 * <p>
 * The order is {@code ibv_rc_pingpong}'s: the client ({@link #connect}) writes its
 * record, reads the server's, writes {@code "done"} and closes, then moves its QP; the
 * server ({@link #accept}) reads the client's record, moves its QP to RTR and RTS, and
 * only then answers, so the client's first send finds it ready. Post the receives before
 * calling either, after {@link QueuePair#moveToInit(int)} (rxe refuses receives in
 * RESET).
 *
 * <p>
 * Every step is bounded ({@link ExchangeOptions#connectTimeout()},
 * {@link ExchangeOptions#ioTimeout()}); a peer that is absent, silent, closes early or
 * sends something else ends in an {@link ExchangeException} naming the peer and the step.
 * The TCP socket is closed on every path; the queue pair stays the caller's (on a failure
 * it may be left in INIT or RTR: move it to error or close it). Stateless; concurrent
 * exchanges on different queue pairs are independent.
 */
public final class OutOfBand {

	/**
	 * GID table entries {@link #findGidIndex} reads: the IPv4 GIDs come first, and rxe's
	 * table has 1024 entries.
	 */
	public static final int GID_SCAN_ENTRIES = 16;

	private OutOfBand() {
	}

	/**
	 * The index of the first IPv4-mapped RoCE v2 GID ({@link GidEntry#isIpv4RoceV2()})
	 * among the first {@value #GID_SCAN_ENTRIES} entries of {@code port}'s GID table
	 * ({@code ibv_query_gid_ex}), or -1.
	 */
	public static int findGidIndex(Context context, int port) {
		int entries = Math.min(GID_SCAN_ENTRIES, context.queryPort(port).gidTableLength());
		for (int i = 0; i < entries; i++) {
			try {
				if (context.queryGidEntry(port, i).isIpv4RoceV2()) {
					return i;
				}
			}
			catch (VerbsException e) {
				// an empty entry (ENODATA): keep looking
			}
		}
		return -1;
	}

	/**
	 * The local GID index {@code options} selects on {@code context}: the explicit one,
	 * the one found by type, or {@link ExchangeOptions#NO_GID} on InfiniBand when none is
	 * found.
	 * @throws IllegalStateException when a RoCE port has no IPv4 RoCE v2 GID in its first
	 * entries
	 */
	public static int gidIndex(Context context, ExchangeOptions options) {
		if (options.gidIndex() != ExchangeOptions.FIND_GID) {
			return options.gidIndex();
		}
		int found = findGidIndex(context, options.port());
		if (found >= 0) {
			return found;
		}
		if (context.queryPort(options.port()).linkLayer() == PortAttributes.LinkLayer.INFINIBAND) {
			return ExchangeOptions.NO_GID;
		}
		throw new IllegalStateException("no IPv4 RoCE v2 GID among the first " + GID_SCAN_ENTRIES + " entries of "
				+ context.deviceName() + " port " + options.port()
				+ " (does its netdev have an IPv4 address?); set ExchangeOptions.gidIndex");
	}

	/**
	 * The record of {@code qp} as {@code options} would announce it: the port's LID, the
	 * QPN, {@code parameters.sqPsn()}, the GID at the selected index and the path MTU.
	 */
	public static Endpoint localEndpoint(QueuePair qp, ExchangeOptions options) {
		return localEndpoint(qp, options, gidIndex(qp.protectionDomain().context(), options));
	}

	private static Endpoint localEndpoint(QueuePair qp, ExchangeOptions options, int gidIndex) {
		Context ctx = qp.protectionDomain().context();
		PortAttributes port = ctx.queryPort(options.port());
		ConnectionParameters p = options.parameters();
		int mtu = p.pathMtu() == ConnectionParameters.ACTIVE_MTU ? port.activeMtu() : p.pathMtu();
		return new Endpoint(port.lid(), qp.qpNum(), p.sqPsn(), gid(ctx, options.port(), gidIndex), mtu);
	}

	/**
	 * The record of a UD queue pair that accepts {@code qkey}: the port's LID, the QPN,
	 * the Q_Key and the GID at the index {@code options} selects.
	 */
	public static DatagramEndpoint localDatagramEndpoint(QueuePair qp, int qkey, ExchangeOptions options) {
		Context ctx = qp.protectionDomain().context();
		int gidIndex = gidIndex(ctx, options);
		return new DatagramEndpoint(ctx.queryPort(options.port()).lid(), qp.qpNum(), qkey,
				gid(ctx, options.port(), gidIndex));
	}

	private static Gid gid(Context ctx, int port, int gidIndex) {
		return gidIndex == ExchangeOptions.NO_GID ? Endpoint.NO_GID : ctx.queryGid(port, gidIndex);
	}

	/**
	 * The client role of {@code ibv_rc_pingpong <server>}: exchanges records with the
	 * server at {@code server}, then connects {@code qp} (in RESET or INIT) to it.
	 * @return the server's record
	 * @throws ExchangeException when the exchange fails (nothing is changed on the QP)
	 * @throws VerbsException when {@code ibv_modify_qp} refuses the peer's values
	 */
	public static Endpoint connect(QueuePair qp, InetSocketAddress server, ExchangeOptions options) {
		int gidIndex = gidIndex(qp.protectionDomain().context(), options);
		Endpoint local = localEndpoint(qp, options, gidIndex);
		Endpoint remote = PingpongWire
			.decode(clientExchange(server, PingpongWire.encode(local), PingpongWire.MESSAGE_BYTES, options));
		connectQp(qp, local, gidIndex, remote, options);
		return remote;
	}

	/**
	 * The server role of {@code ibv_rc_pingpong}: takes the next client of
	 * {@code listener} (within {@code options.connectTimeout()}), reads its record,
	 * connects {@code qp} (in RESET or INIT) to it, answers with this side's record and
	 * waits for the client's {@code "done"}.
	 * @return the client's record
	 * @throws ExchangeException when the exchange fails
	 * @throws VerbsException when {@code ibv_modify_qp} refuses the peer's values (the
	 * client then gets no answer)
	 */
	public static Endpoint accept(ExchangeListener listener, QueuePair qp, ExchangeOptions options) {
		int gidIndex = gidIndex(qp.protectionDomain().context(), options);
		Endpoint local = localEndpoint(qp, options, gidIndex);
		Endpoint[] remote = new Endpoint[1];
		serverExchange(listener, PingpongWire.MESSAGE_BYTES, theirs -> {
			remote[0] = PingpongWire.decode(theirs);
			connectQp(qp, local, gidIndex, remote[0], options);
			return PingpongWire.encode(local);
		}, options);
		return remote[0];
	}

	/**
	 * The client side of a datagram exchange: sends {@code local} to the server at
	 * {@code server} and returns its record (make an address handle to it with
	 * {@link DatagramEndpoint#addressFrom}).
	 */
	public static DatagramEndpoint exchange(DatagramEndpoint local, InetSocketAddress server, ExchangeOptions options) {
		return PingpongWire.decodeDatagram(
				clientExchange(server, PingpongWire.encode(local), PingpongWire.DATAGRAM_MESSAGE_BYTES, options));
	}

	/**
	 * The server side of a datagram exchange: answers the next client with {@code local}.
	 */
	public static DatagramEndpoint accept(ExchangeListener listener, DatagramEndpoint local, ExchangeOptions options) {
		DatagramEndpoint[] remote = new DatagramEndpoint[1];
		serverExchange(listener, PingpongWire.DATAGRAM_MESSAGE_BYTES, theirs -> {
			remote[0] = PingpongWire.decodeDatagram(theirs);
			return PingpongWire.encode(local);
		}, options);
		return remote[0];
	}

	/** INIT, RTR, RTS with the peer's values, as {@code pp_connect_ctx}. */
	private static void connectQp(QueuePair qp, Endpoint local, int gidIndex, Endpoint remote,
			ExchangeOptions options) {
		int mtu = remote.mtu() == Endpoint.UNKNOWN_MTU ? local.mtu() : Math.min(local.mtu(), remote.mtu());
		ConnectionParameters p = options.parameters().withSqPsn(local.psn()).withRqPsn(remote.psn()).withPathMtu(mtu);
		qp.connect(options.port(), Math.max(gidIndex, 0), remote.gid(), remote.lid(), remote.qpn(), p);
	}

	private static byte[] clientExchange(InetSocketAddress server, byte[] mine, int theirLength,
			ExchangeOptions options) {
		if (server.isUnresolved()) {
			throw new ExchangeException("cannot resolve the exchange server " + server);
		}
		try (Socket s = new Socket()) {
			try {
				s.connect(server, ExchangeOptions.socketMillis(options.connectTimeout().toNanos()));
			}
			catch (SocketTimeoutException e) {
				throw new ExchangeException(
						"no answer from the exchange server " + server + " within " + options.connectTimeout(), e);
			}
			catch (IOException e) {
				throw new ExchangeException("cannot connect to the exchange server " + server + ": " + e.getMessage(),
						e);
			}
			String peer = "the exchange server " + server;
			try {
				s.setTcpNoDelay(true);
				OutputStream out = s.getOutputStream();
				write(out, mine, peer, "its endpoint record");
				byte[] theirs = readFully(s, theirLength, peer, "endpoint record", options.ioTimeout());
				write(out, PingpongWire.done(), peer, "\"done\"");
				return theirs;
			}
			catch (IOException e) {
				throw new ExchangeException("the exchange with " + peer + " failed: " + e.getMessage(), e);
			}
		}
		catch (IOException e) {
			throw new ExchangeException("closing the connection to " + server + " failed: " + e.getMessage(), e);
		}
	}

	private static void serverExchange(ExchangeListener listener, int theirLength, Function<byte[], byte[]> answer,
			ExchangeOptions options) {
		try (Socket s = listener.accept(options.connectTimeout())) {
			String peer = "the exchange client " + s.getRemoteSocketAddress();
			try {
				s.setTcpNoDelay(true);
				byte[] theirs = readFully(s, theirLength, peer, "endpoint record", options.ioTimeout());
				write(s.getOutputStream(), answer.apply(theirs), peer, "this side's endpoint record");
				byte[] done = readFully(s, PingpongWire.DONE_BYTES_LENGTH, peer, "\"done\"", options.ioTimeout());
				if (!PingpongWire.isDone(done)) {
					throw new ExchangeException(peer + " sent something else than \"done\" after the records");
				}
			}
			catch (IOException e) {
				throw new ExchangeException("the exchange with " + peer + " failed: " + e.getMessage(), e);
			}
		}
		catch (IOException e) {
			throw new ExchangeException("closing an exchange connection failed: " + e.getMessage(), e);
		}
	}

	private static void write(OutputStream out, byte[] bytes, String peer, String what) {
		try {
			out.write(bytes);
			out.flush();
		}
		catch (IOException e) {
			throw new ExchangeException("sending " + what + " to " + peer + " failed: " + e.getMessage(), e);
		}
	}

	/**
	 * Reads exactly {@code length} bytes within {@code timeout} for the whole record:
	 * each read waits only for what is left of it ({@code SO_TIMEOUT} set before every
	 * read), so a peer that trickles its record ends at the same bound as a silent one.
	 */
	private static byte[] readFully(Socket s, int length, String peer, String what, Duration timeout) {
		byte[] buf = new byte[length];
		int got = 0;
		long deadline = System.nanoTime() + timeout.toNanos();
		try {
			InputStream in = s.getInputStream();
			while (got < length) {
				long left = deadline - System.nanoTime();
				if (left <= 0) {
					throw new SocketTimeoutException("the record's deadline passed");
				}
				s.setSoTimeout(ExchangeOptions.socketMillis(left));
				int n = in.read(buf, got, length - got);
				if (n < 0) {
					throw new ExchangeException(peer + " closed the connection after " + got + " of the " + length
							+ " bytes of its " + what);
				}
				got += n;
			}
			return buf;
		}
		catch (SocketTimeoutException e) {
			throw new ExchangeException(peer + " did not send its " + length + "-byte " + what + " within " + timeout
					+ " (got " + got + " bytes)", e);
		}
		catch (IOException e) {
			throw new ExchangeException("reading the " + what + " of " + peer + " failed: " + e.getMessage(), e);
		}
	}

}
