package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.function.BiFunction;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.GidEntry;
import dev.rdma.verbs.PortAttributes;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.VerbsException;
import org.jspecify.annotations.Nullable;

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
 * only then answers, so the client's first send finds it ready. A client that refuses the
 * server's record closes without {@code "done"}, which ends an {@code ibv_rc_pingpong}
 * server; a server that refuses the client's closes without answering. Post the receives
 * before calling either, after {@link QueuePair#moveToInit(int)} (rxe refuses receives in
 * RESET). The record carries no path MTU: each side connects with the one of its own
 * {@link ExchangeOptions#parameters()}, so configure both sides alike
 * ({@code ibv_rc_pingpong}: 1024 unless {@code -m}).
 *
 * <p>
 * What can be checked locally is checked before the TCP connection is opened (client) or
 * a client is accepted (server), so that a peer never commits to a connection this side
 * then refuses (an {@code ibv_rc_pingpong} server would wait in RTS for ever): the queue
 * pair is RC and in RESET or INIT, the port exists, the path MTU is at most the port's
 * active MTU, an InfiniBand port has a LID, a RoCE port is addressed by GID, and the
 * selected GID table entry is not empty. A peer's record without a GID is refused on a
 * RoCE port, naming the peer, before {@code ibv_modify_qp}.
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
		return gidIndex(context, options, context.queryPort(options.port()));
	}

	private static int gidIndex(Context context, ExchangeOptions options, PortAttributes port) {
		if (options.gidIndex() != ExchangeOptions.FIND_GID) {
			return options.gidIndex();
		}
		int found = findGidIndex(context, options.port());
		if (found >= 0) {
			return found;
		}
		if (port.linkLayer() == PortAttributes.LinkLayer.INFINIBAND) {
			return ExchangeOptions.NO_GID;
		}
		throw new IllegalStateException("no IPv4 RoCE v2 GID among the first " + GID_SCAN_ENTRIES + " entries of "
				+ context.deviceName() + " port " + options.port()
				+ " (does its netdev have an IPv4 address?); set ExchangeOptions.gidIndex");
	}

	/**
	 * The record of {@code qp} as {@code options} would announce it: the port's LID
	 * ({@code ibv_query_port}), the QPN, {@code parameters.sqPsn()}, the GID at the
	 * selected index ({@code ibv_query_gid}) and the path MTU.
	 * @throws IllegalStateException when the port cannot be reached with this record: an
	 * InfiniBand port without a LID, {@link ExchangeOptions#NO_GID} on a RoCE port, or a
	 * GID index whose table entry is empty (see {@link #localGid})
	 * @throws VerbsException when {@code ibv_query_port} or {@code ibv_query_gid} fails
	 * (a port or GID index the device does not have: EINVAL)
	 */
	public static Endpoint localEndpoint(QueuePair qp, ExchangeOptions options) {
		return local(qp, options).endpoint();
	}

	/**
	 * The record of a UD queue pair that accepts {@code qkey}: the port's LID, the QPN,
	 * the Q_Key and the GID at the index {@code options} selects.
	 * @throws IllegalStateException on {@link ExchangeOptions#NO_GID} on a RoCE port, or
	 * a GID index whose table entry is empty
	 * @throws VerbsException when {@code ibv_query_port} or {@code ibv_query_gid} fails
	 */
	public static DatagramEndpoint localDatagramEndpoint(QueuePair qp, int qkey, ExchangeOptions options) {
		Context ctx = qp.protectionDomain().context();
		PortAttributes port = ctx.queryPort(options.port());
		int gidIndex = gidIndex(ctx, options, port);
		return new DatagramEndpoint(port.lid(), qp.qpNum(), qkey, localGid(ctx, options.port(), port, gidIndex));
	}

	/**
	 * This side of an RC exchange, known before any TCP: the record, the GID index, the
	 * port's attributes and its name ({@code "rxe0 port 1"}).
	 */
	private record Local(Endpoint endpoint, int gidIndex, PortAttributes port, String where) {
	}

	private static Local local(QueuePair qp, ExchangeOptions options) {
		Context ctx = qp.protectionDomain().context();
		PortAttributes port = ctx.queryPort(options.port());
		String where = where(ctx, options.port());
		requireLid(port, where);
		int gidIndex = gidIndex(ctx, options, port);
		Gid gid = localGid(ctx, options.port(), port, gidIndex);
		ConnectionParameters p = options.parameters();
		int mtu = p.pathMtu() == ConnectionParameters.ACTIVE_MTU ? port.activeMtu() : p.pathMtu();
		return new Local(new Endpoint(port.lid(), qp.qpNum(), p.sqPsn(), gid, mtu), gidIndex, port, where);
	}

	/**
	 * What {@link #connect} and
	 * {@link #accept(ExchangeListener, QueuePair, ExchangeOptions)} check before any TCP:
	 * everything {@code qp.connect} would refuse after the peer committed, and the local
	 * record.
	 */
	private static Local checkedLocal(QueuePair qp, ExchangeOptions options) {
		if (qp.type() != QueuePair.Type.RC) {
			throw new IllegalStateException(qp + " is a " + qp.type()
					+ " queue pair: OutOfBand.connect and accept connect RC queue pairs (a UD queue pair exchanges "
					+ "DatagramEndpoint records: OutOfBand.exchange and accept(listener, DatagramEndpoint, options))");
		}
		QueuePair.State state = qp.state();
		if (state != QueuePair.State.RESET && state != QueuePair.State.INIT) {
			throw new IllegalStateException(qp + " is in state " + state
					+ ": OutOfBand.connect and accept move a queue pair from RESET or INIT to RTR and RTS");
		}
		Local local = local(qp, options);
		ConnectionParameters p = options.parameters();
		if (p.pathMtu() != ConnectionParameters.ACTIVE_MTU && p.pathMtu() > local.port().activeMtu()) {
			throw new IllegalArgumentException("pathMtu (path_mtu) " + p.pathMtu() + " of ExchangeOptions.parameters "
					+ "exceeds the active MTU " + local.port().activeMtu() + " of " + local.where());
		}
		return local;
	}

	private static String where(Context ctx, int port) {
		return ctx.deviceName() + " port " + port;
	}

	/**
	 * As {@code ibv_rc_pingpong}, which stops with "Couldn't get local LID": a port whose
	 * link layer is not Ethernet is addressed by its LID, and LID 0 means the subnet
	 * manager has not configured it.
	 */
	static void requireLid(PortAttributes port, String where) {
		if (port.linkLayer() != PortAttributes.LinkLayer.ETHERNET && port.lid() == 0) {
			throw new IllegalStateException(where + " (link layer " + port.linkLayer() + ", state " + port.state()
					+ ") has LID 0: no subnet manager has configured it, and a peer cannot reach it "
					+ "(ibv_rc_pingpong stops here with \"Couldn't get local LID\")");
		}
	}

	/**
	 * {@link ExchangeOptions#NO_GID} (LID addressing) is refused on a RoCE port: Ethernet
	 * has no LIDs, the peer could reach it only by GID.
	 */
	static void requireGidOnRoce(PortAttributes port, int gidIndex, String where) {
		if (gidIndex == ExchangeOptions.NO_GID && port.linkLayer() == PortAttributes.LinkLayer.ETHERNET) {
			throw new IllegalStateException(
					"ExchangeOptions.gidIndex is NO_GID (LID addressing), but the link layer of " + where
							+ " is ETHERNET (RoCE), where a peer is addressed by GID only: set a GID index "
							+ "(ibv_rc_pingpong -g) or FIND_GID");
		}
	}

	/**
	 * The local GID at {@code gidIndex} ({@code ibv_query_gid}), or
	 * {@link Endpoint#NO_GID} for {@link ExchangeOptions#NO_GID}.
	 * @throws IllegalStateException on NO_GID on a RoCE port, or when the entry is empty:
	 * rdma-core's {@code ibv_query_gid} turns the ENODATA of an empty entry into success
	 * with an all-zero GID, which a peer cannot reach
	 */
	private static Gid localGid(Context ctx, int portNum, PortAttributes port, int gidIndex) {
		String where = where(ctx, portNum);
		requireGidOnRoce(port, gidIndex, where);
		if (gidIndex == ExchangeOptions.NO_GID) {
			return Endpoint.NO_GID;
		}
		Gid gid = ctx.queryGid(portNum, gidIndex);
		if (gid.isZero()) {
			VerbsException why = null;
			try {
				ctx.queryGidEntry(portNum, gidIndex);
			}
			catch (VerbsException e) {
				why = e;
			}
			throw emptyGid(gidIndex, where, why);
		}
		return gid;
	}

	static IllegalStateException emptyGid(int gidIndex, String where, @Nullable VerbsException why) {
		return new IllegalStateException("GID index " + gidIndex + " of " + where
				+ " is empty: ibv_query_gid gave an all-zero GID" + (why == null ? "" : " (" + why.getMessage() + ")")
				+ ", which a peer cannot reach; set ExchangeOptions.gidIndex (ibv_rc_pingpong -g) to a populated "
				+ "entry of /sys/class/infiniband/" + where.replace(" port ", "/ports/") + "/gids, or FIND_GID", why);
	}

	/**
	 * The client role of {@code ibv_rc_pingpong <server>}: exchanges records with the
	 * server at {@code server}, then connects {@code qp} (in RESET or INIT) to it.
	 * @return the server's record
	 * @throws IllegalStateException before any TCP: {@code qp} is not RC, or not in RESET
	 * or INIT, or the local address is unusable (see {@link #localEndpoint})
	 * @throws IllegalArgumentException before any TCP: the path MTU exceeds the port's
	 * active MTU
	 * @throws ExchangeException when the exchange fails, or the server's record has no
	 * GID while the local port is RoCE (nothing is changed on the QP)
	 * @throws VerbsException when {@code ibv_query_port} or {@code ibv_query_gid} fails
	 * (before any TCP), or {@code ibv_modify_qp} refuses the peer's values
	 */
	public static Endpoint connect(QueuePair qp, InetSocketAddress server, ExchangeOptions options) {
		Local local = checkedLocal(qp, options);
		Endpoint remote = clientExchange(server, PingpongWire.encode(local.endpoint()), PingpongWire.MESSAGE_BYTES,
				options, (peer, theirs) -> {
					Endpoint r = PingpongWire.decode(theirs);
					requirePeerGidOnRoce(local.port(), local.where(), r, peer);
					return r;
				});
		connectQp(qp, local, remote, options);
		return remote;
	}

	/**
	 * The server role of {@code ibv_rc_pingpong}: takes the next client of
	 * {@code listener} (within {@code options.connectTimeout()}), reads its record,
	 * connects {@code qp} (in RESET or INIT) to it, answers with this side's record and
	 * waits for the client's {@code "done"}.
	 * @return the client's record
	 * @throws IllegalStateException before a client is accepted: {@code qp} is not RC, or
	 * not in RESET or INIT, or the local address is unusable (see {@link #localEndpoint})
	 * @throws IllegalArgumentException before a client is accepted: the path MTU exceeds
	 * the port's active MTU
	 * @throws ExchangeException when the exchange fails, or the client's record has no
	 * GID while the local port is RoCE (the client then gets no answer)
	 * @throws VerbsException when {@code ibv_query_port} or {@code ibv_query_gid} fails
	 * (before a client is accepted), or {@code ibv_modify_qp} refuses the peer's values
	 * (the client then gets no answer)
	 */
	public static Endpoint accept(ExchangeListener listener, QueuePair qp, ExchangeOptions options) {
		Local local = checkedLocal(qp, options);
		Endpoint[] remote = new Endpoint[1];
		serverExchange(listener, PingpongWire.MESSAGE_BYTES, (peer, theirs) -> {
			remote[0] = PingpongWire.decode(theirs);
			requirePeerGidOnRoce(local.port(), local.where(), remote[0], peer);
			connectQp(qp, local, remote[0], options);
			return PingpongWire.encode(local.endpoint());
		}, options);
		return remote[0];
	}

	/**
	 * The client side of a datagram exchange: sends {@code local} to the server at
	 * {@code server} and returns its record (make an address handle to it with
	 * {@link DatagramEndpoint#addressFrom}).
	 */
	public static DatagramEndpoint exchange(DatagramEndpoint local, InetSocketAddress server, ExchangeOptions options) {
		return clientExchange(server, PingpongWire.encode(local), PingpongWire.DATAGRAM_MESSAGE_BYTES, options,
				(peer, theirs) -> PingpongWire.decodeDatagram(theirs));
	}

	/**
	 * The server side of a datagram exchange: answers the next client with {@code local}.
	 */
	public static DatagramEndpoint accept(ExchangeListener listener, DatagramEndpoint local, ExchangeOptions options) {
		DatagramEndpoint[] remote = new DatagramEndpoint[1];
		serverExchange(listener, PingpongWire.DATAGRAM_MESSAGE_BYTES, (peer, theirs) -> {
			remote[0] = PingpongWire.decodeDatagram(theirs);
			return PingpongWire.encode(local);
		}, options);
		return remote[0];
	}

	/**
	 * INIT, RTR, RTS with the peer's values, as {@code pp_connect_ctx}. The path MTU is
	 * this side's: the record carries none ({@code remote.mtu()} is always
	 * {@link Endpoint#UNKNOWN_MTU}).
	 */
	private static void connectQp(QueuePair qp, Local local, Endpoint remote, ExchangeOptions options) {
		Endpoint mine = local.endpoint();
		ConnectionParameters p = options.parameters()
			.withSqPsn(mine.psn())
			.withRqPsn(remote.psn())
			.withPathMtu(mine.mtu());
		qp.connect(options.port(), Math.max(local.gidIndex(), 0), remote.gid(), remote.lid(), remote.qpn(), p);
	}

	/**
	 * A peer record whose GID has a zero interface id gives an address without GRH
	 * (rdma-core's rule), which a RoCE port cannot use: {@code ibv_modify_qp} to RTR
	 * would fail with EINVAL naming neither the GID nor the peer.
	 */
	static void requirePeerGidOnRoce(PortAttributes port, String where, Endpoint remote, String peer) {
		if (port.linkLayer() == PortAttributes.LinkLayer.ETHERNET && remote.gid().interfaceId() == 0) {
			throw new ExchangeException(peer + " announced no GID (GID " + remote.gid() + ", LID "
					+ String.format("0x%04x, QPN 0x%06x", remote.lid(), remote.qpn()) + "), but " + where
					+ " is RoCE (link layer ETHERNET), where the peer is addressed by its GID only: "
					+ "an ibv_rc_pingpong peer needs -g <gid index> on RoCE");
		}
	}

	/**
	 * Writes {@code mine}, reads the server's record and hands it to {@code take}, and
	 * only when that accepted it writes {@code "done"}: a record this side refuses ends
	 * the connection without {@code "done"}, so an {@code ibv_rc_pingpong} server fails
	 * ("Couldn't send/recv local address") instead of waiting in RTS for a client that
	 * never comes.
	 */
	private static <T> T clientExchange(InetSocketAddress server, byte[] mine, int theirLength, ExchangeOptions options,
			BiFunction<String, byte[], T> take) {
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
				T taken = take.apply(peer, theirs);
				write(out, PingpongWire.done(), peer, "\"done\"");
				return taken;
			}
			catch (IOException e) {
				throw new ExchangeException("the exchange with " + peer + " failed: " + e.getMessage(), e);
			}
		}
		catch (IOException e) {
			throw new ExchangeException("closing the connection to " + server + " failed: " + e.getMessage(), e);
		}
	}

	private static void serverExchange(ExchangeListener listener, int theirLength,
			BiFunction<String, byte[], byte[]> answer, ExchangeOptions options) {
		try (Socket s = listener.accept(options.connectTimeout())) {
			String peer = "the exchange client " + s.getRemoteSocketAddress();
			try {
				s.setTcpNoDelay(true);
				byte[] theirs = readFully(s, theirLength, peer, "endpoint record", options.ioTimeout());
				write(s.getOutputStream(), answer.apply(peer, theirs), peer, "this side's endpoint record");
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
