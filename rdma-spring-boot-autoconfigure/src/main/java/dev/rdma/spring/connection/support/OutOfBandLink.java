package dev.rdma.spring.connection.support;

import java.io.IOException;
import java.io.InputStream;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.listener.Deadlines;
import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.exchange.Endpoint;
import dev.rdma.verbs.exchange.ExchangeOptions;
import dev.rdma.verbs.exchange.OutOfBand;
import dev.rdma.verbs.exchange.PingpongWire;

/**
 * The TCP connection of an out-of-band exchange, kept open as the link of one
 * {@link PeerConnection} (liveness {@code tcp}), or closed after the records (liveness
 * {@code none}).
 *
 * <p>
 * <b>Exchange.</b> The bytes of {@code ibv_rc_pingpong} ({@link PingpongWire}): the
 * client writes its endpoint record, the server reads it, connects its QP (INIT, RTR,
 * RTS) and answers with its own record; the client connects its QP and only then writes
 * {@code "done"}, so that neither side's first send finds the other's QP not ready. Each
 * side posted its receives before (QP in INIT). Every read is bounded by the attempt's
 * deadline ({@code connect-timeout}).
 *
 * <p>
 * <b>Liveness {@code tcp}</b> (the default). Unlike {@link OutOfBand#connect}, the socket
 * stays open afterwards, non-blocking and silent: its end of stream or a reset
 * ({@link #alive()} false) means the peer went away (its process ended or it closed the
 * connection); closing it is the orderly disconnect ({@link #disconnect}: FIN, then up to
 * the timeout for the peer's). TCP keep-alive is on. A peer whose host vanishes without a
 * FIN or reset is noticed by the QP (a send completing with RETRY_EXC_ERR ends the
 * {@link PeerConnection}, see {@link PeerConnection#failure()}, and its owner closes this
 * link), or when TCP gives up.
 *
 * <p>
 * Both ends must therefore keep the socket open: the peer is another application of this
 * starter. {@code ibv_rc_pingpong} itself closes it after the exchange, which this side
 * reads as the peer's end.
 *
 * <p>
 * <b>Liveness {@code none}</b> ({@link #detach}): the socket is closed after the
 * exchange, as {@code ibv_rc_pingpong} does (its client closes it after writing
 * {@code "done"}, its server after reading it). The link then only keeps the addresses:
 * {@link #alive()} stays true until {@link #close}, {@link #disconnect} tells the peer
 * nothing, and only a failed completion of the QP ends the {@link PeerConnection}. Its
 * retry count is then at most {@link #NONE_MAX_RETRY_COUNT} ({@link #options}).
 */
final class OutOfBandLink implements PeerLink {

	/** The path MTU when none is configured: {@code ibv_rc_pingpong}'s default. */
	static final int DEFAULT_PATH_MTU = 1024;

	/**
	 * The QP's highest retry_cnt with liveness {@code none}: Soft-RoCE retransmits for
	 * ever at 7 ({@code rxe_comp.c}), and no other signal would end the link. With the
	 * local ACK timeout 14 (4.096 us * 2^14 = 67 ms), a send to a peer whose QP is gone
	 * fails with RETRY_EXC_ERR after 7 * 67 ms = 0.47 s.
	 */
	static final int NONE_MAX_RETRY_COUNT = 6;

	private final SocketChannel channel;

	private final InetSocketAddress peer;

	private final InetSocketAddress local;

	private final ByteBuffer scratch = ByteBuffer.allocate(64);

	/** The client's {@code "done"} as it arrives (the server's side). */
	private final ByteBuffer done = ByteBuffer.allocate(PingpongWire.DONE_BYTES_LENGTH);

	private volatile boolean closed;

	/** Liveness {@code none}: the socket was closed after the exchange. */
	private volatile boolean detached;

	private OutOfBandLink(SocketChannel channel) throws IOException {
		this.channel = channel;
		channel.socket().setTcpNoDelay(true);
		channel.socket().setKeepAlive(true);
		this.peer = (InetSocketAddress) channel.getRemoteAddress();
		this.local = (InetSocketAddress) channel.getLocalAddress();
	}

	/**
	 * Connects to the exchange server at {@code server} within {@code timeout}.
	 * @throws AttemptFailedException when it cannot (kind TIMEOUT or UNREACHABLE)
	 */
	static OutOfBandLink connect(InetSocketAddress server, Duration timeout) {
		return connect(open(server), server, timeout);
	}

	/**
	 * A new (unconnected) channel for
	 * {@link #connect(SocketChannel, InetSocketAddress, Duration)}.
	 * @throws AttemptFailedException when it cannot be opened (kind IO_ERROR)
	 */
	static SocketChannel open(InetSocketAddress server) {
		try {
			return SocketChannel.open();
		}
		catch (IOException ex) {
			throw new AttemptFailedException("IO_ERROR",
					"cannot open a socket for the exchange server " + server + ": " + ex.getMessage(), ex);
		}
	}

	/**
	 * Connects {@code ch} to the exchange server at {@code server} within
	 * {@code timeout}; closing {@code ch} from another thread ends the connect at once
	 * (kind UNREACHABLE, "closed").
	 * @throws AttemptFailedException when it cannot (kind TIMEOUT or UNREACHABLE); the
	 * channel is closed then
	 */
	static OutOfBandLink connect(SocketChannel ch, InetSocketAddress server, Duration timeout) {
		try {
			ch.socket().connect(server, millis(timeout));
			return new OutOfBandLink(ch);
		}
		catch (SocketTimeoutException ex) {
			closeQuietly(ch);
			throw new AttemptFailedException("TIMEOUT",
					"no answer from the exchange server " + server + " within " + timeout, ex);
		}
		catch (IOException ex) {
			closeQuietly(ch);
			throw new AttemptFailedException("UNREACHABLE",
					"cannot connect to the exchange server " + server + ": " + ex.getMessage(), ex);
		}
	}

	/**
	 * The link of a connection accepted by a server (in blocking mode until exchanged).
	 */
	static OutOfBandLink accepted(SocketChannel channel) {
		try {
			channel.configureBlocking(true);
			return new OutOfBandLink(channel);
		}
		catch (IOException ex) {
			closeQuietly(channel);
			throw new AttemptFailedException("EXCHANGE", "an exchange client went away at once: " + ex.getMessage(),
					ex);
		}
	}

	/**
	 * The exchange options of {@code settings}: its device port and GID index; the QP
	 * values of its {@code cm.*} properties where they apply (retry-count,
	 * rnr-retry-count; responder-resources and initiator-depth as max_dest_rd_atomic and
	 * max_rd_atomic, their default 255 meaning {@code ibv_rc_pingpong}'s 1); its
	 * {@code out-of-band.path-mtu}, by default {@code ibv_rc_pingpong}'s 1024 (the port's
	 * active MTU when lower, see {@link #connectQp}); a random PSN. With liveness
	 * {@code none}, the retry count is at most {@link #NONE_MAX_RETRY_COUNT}.
	 */
	static ExchangeOptions options(ConnectionSettings settings, Duration timeout) {
		ConnectionSettings.OutOfBandOptions oob = settings.outOfBand();
		if (oob == null) {
			throw new IllegalStateException("connection '" + settings.name() + "' uses rdma_cm");
		}
		CmParameters cm = settings.cm();
		int retryCount = (oob.liveness() == ConnectionSettings.Liveness.NONE)
				? Math.min(cm.retryCount(), NONE_MAX_RETRY_COUNT) : cm.retryCount();
		ConnectionParameters parameters = ConnectionParameters.DEFAULTS.withRetryCount(retryCount)
			.withRnrRetry(cm.rnrRetryCount())
			.withMaxRdAtomic(readAtomic(cm.initiatorDepth()))
			.withMaxDestRdAtomic(readAtomic(cm.responderResources()))
			.withSqPsn(ThreadLocalRandom.current().nextInt(ConnectionParameters.MAX_PSN + 1))
			.withPathMtu(oob.pathMtu() == ConnectionSettings.OutOfBandOptions.DEFAULT_PATH_MTU
					? ConnectionParameters.ACTIVE_MTU : oob.pathMtu());
		int gid = oob.gidIndex() < 0 ? ExchangeOptions.FIND_GID : oob.gidIndex();
		Duration bound = Duration.ofMillis(millis(timeout));
		return new ExchangeOptions(oob.port(), gid, parameters, bound, bound);
	}

	private static int readAtomic(int value) {
		return value == CmParameters.DEVICE_MAXIMUM ? 1 : value;
	}

	/**
	 * The client's side: {@code qp} (INIT, receives posted) is connected to the server's
	 * and RTS when this returns, the server told so ({@code "done"}); then the socket
	 * stays open or is closed, as {@code liveness} says.
	 */
	Endpoint exchangeAsClient(QueuePair qp, ExchangeOptions options, ConnectionSettings.Liveness liveness,
			long deadline) {
		int gidIndex = OutOfBand.gidIndex(qp.protectionDomain().context(), options);
		Endpoint mine = OutOfBand.localEndpoint(qp, options);
		write(PingpongWire.encode(mine), "its endpoint record");
		Endpoint theirs = PingpongWire.decode(read(PingpongWire.MESSAGE_BYTES, "endpoint record", deadline));
		connectQp(qp, mine, gidIndex, theirs, options);
		write(PingpongWire.done(), "\"done\"");
		afterExchange(liveness);
		return theirs;
	}

	/**
	 * The server's side up to its answer: reads the client's record (unless the transport
	 * read it before, {@code record}), connects {@code qp} (INIT, receives posted) and
	 * answers. The client's {@code "done"} (its QP is RTS then, or, for
	 * {@code ibv_rc_pingpong}, about to be) is then read without blocking
	 * ({@link #doneArrived}), and {@link #finishExchange} ends the exchange.
	 */
	Endpoint answerAsServer(QueuePair qp, ExchangeOptions options, long deadline, byte @Nullable [] record) {
		int gidIndex = OutOfBand.gidIndex(qp.protectionDomain().context(), options);
		Endpoint mine = OutOfBand.localEndpoint(qp, options);
		Endpoint theirs = PingpongWire
			.decode((record != null) ? record : read(PingpongWire.MESSAGE_BYTES, "endpoint record", deadline));
		connectQp(qp, mine, gidIndex, theirs, options);
		write(PingpongWire.encode(mine), "this side's endpoint record");
		return theirs;
	}

	/**
	 * Whether the client's {@code "done"} has arrived, after {@link #answerAsServer};
	 * never blocks (what arrived so far is kept for the next call).
	 * @throws AttemptFailedException when the client closed the connection before it, or
	 * sent something else
	 */
	boolean doneArrived() {
		try {
			channel.configureBlocking(false);
			try {
				if (channel.read(done) < 0) {
					throw new AttemptFailedException("EXCHANGE", peer + " closed the exchange connection after "
							+ done.position() + " of the " + done.capacity() + " bytes of its \"done\"");
				}
			}
			finally {
				channel.configureBlocking(true);
			}
		}
		catch (IOException ex) {
			throw new AttemptFailedException("EXCHANGE",
					"reading the \"done\" of " + peer + " failed: " + ex.getMessage(), ex);
		}
		if (done.hasRemaining()) {
			return false;
		}
		if (!PingpongWire.isDone(done.array())) {
			throw new AttemptFailedException("EXCHANGE",
					"the exchange client " + peer + " sent something else than \"done\" after the records");
		}
		return true;
	}

	/**
	 * The end of the server's exchange, once {@link #doneArrived}: the socket stays open
	 * or is closed, as {@code liveness} says.
	 */
	void finishExchange(ConnectionSettings.Liveness liveness) {
		afterExchange(liveness);
	}

	/**
	 * INIT, RTR, RTS with the peer's values, as {@code pp_connect_ctx}. The path MTU is
	 * the configured one, or (default, {@link ConnectionParameters#ACTIVE_MTU} in the
	 * options) 1024 capped at the port's active MTU: the records carry no MTU, so both
	 * ends must pick the same, and a port's active MTU may differ from the peer's.
	 */
	private static void connectQp(QueuePair qp, Endpoint mine, int gidIndex, Endpoint theirs, ExchangeOptions options) {
		int mtu = theirs.mtu() == Endpoint.UNKNOWN_MTU ? mine.mtu() : Math.min(mine.mtu(), theirs.mtu());
		if (options.parameters().pathMtu() == ConnectionParameters.ACTIVE_MTU) {
			mtu = Math.min(mtu, DEFAULT_PATH_MTU);
		}
		ConnectionParameters p = options.parameters().withSqPsn(mine.psn()).withRqPsn(theirs.psn()).withPathMtu(mtu);
		qp.connect(options.port(), Math.max(gidIndex, 0), theirs.gid(), theirs.lid(), theirs.qpn(), p);
	}

	private void write(byte[] bytes, String what) {
		try {
			ByteBuffer b = ByteBuffer.wrap(bytes);
			while (b.hasRemaining()) {
				channel.write(b);
			}
		}
		catch (IOException ex) {
			throw new AttemptFailedException("EXCHANGE",
					"sending " + what + " to " + peer + " failed: " + ex.getMessage(), ex);
		}
	}

	/** {@code length} bytes of the exchange (blocking mode) by {@code deadline}. */
	byte[] read(int length, String what, long deadline) {
		byte[] buf = new byte[length];
		int got = 0;
		try {
			InputStream in = channel.socket().getInputStream();
			while (got < length) {
				long left = deadline - System.nanoTime();
				if (left <= 0) {
					throw new SocketTimeoutException();
				}
				channel.socket().setSoTimeout((int) Math.max(1, left / 1_000_000));
				int n = in.read(buf, got, length - got);
				if (n < 0) {
					throw new AttemptFailedException("EXCHANGE", peer + " closed the exchange connection after " + got
							+ " of the " + length + " bytes of its " + what);
				}
				got += n;
			}
			return buf;
		}
		catch (SocketTimeoutException ex) {
			throw new AttemptFailedException("TIMEOUT",
					peer + " did not send its " + length + "-byte " + what + " in time (got " + got + " bytes)", ex);
		}
		catch (IOException ex) {
			throw new AttemptFailedException("EXCHANGE",
					"reading the " + what + " of " + peer + " failed: " + ex.getMessage(), ex);
		}
	}

	private void afterExchange(ConnectionSettings.Liveness liveness) {
		if (liveness == ConnectionSettings.Liveness.NONE) {
			detach();
		}
		else {
			live();
		}
	}

	/**
	 * Liveness {@code none}, after the exchange: closes the socket (the peer reads its
	 * end of stream, as from {@code ibv_rc_pingpong}); the link keeps its addresses and
	 * stays {@link #alive()} until {@link #close}.
	 */
	void detach() {
		detached = true;
		closeQuietly(channel);
	}

	/** Non-blocking from now on (after the exchange): {@link #alive()} polls. */
	void live() {
		try {
			channel.configureBlocking(false);
		}
		catch (IOException ex) {
			throw new AttemptFailedException("EXCHANGE", "the exchange connection to " + peer + " failed", ex);
		}
	}

	/**
	 * False once the peer closed or reset the connection (or this side closed it); never
	 * blocks. Bytes the peer sends (it sends none) are discarded. Once {@link #detach}ed:
	 * true until {@link #close}.
	 */
	synchronized boolean alive() {
		if (closed) {
			return false;
		}
		if (detached) {
			return true;
		}
		try {
			scratch.clear();
			return channel.read(scratch) >= 0;
		}
		catch (IOException | RuntimeException ex) {
			return false;
		}
	}

	/**
	 * FIN to the peer, then up to {@code timeout} for its end of stream; nothing once
	 * {@link #detach}ed (the peer learns of the end by its next failed completion).
	 */
	@Override
	public void disconnect(Duration timeout) {
		if (detached) {
			return;
		}
		long deadline = Deadlines.after(timeout);
		try {
			channel.shutdownOutput();
		}
		catch (IOException | RuntimeException ex) {
			return;
		}
		while (alive() && System.nanoTime() - deadline < 0) {
			LockSupport.parkNanos(2_000_000);
		}
	}

	@Override
	public @Nullable InetSocketAddress peerAddress() {
		return closed ? null : peer;
	}

	@Override
	public @Nullable InetSocketAddress localAddress() {
		return closed ? null : local;
	}

	@Override
	public void close() {
		closed = true;
		closeQuietly(channel);
	}

	private static void closeQuietly(@Nullable SocketChannel ch) {
		if (ch != null) {
			try {
				ch.close();
			}
			catch (IOException ignored) {
				// nothing to flush: the exchange is over or failed
			}
		}
	}

	private static int millis(Duration timeout) {
		return Math.clamp(timeout.toMillis(), 1, Integer.MAX_VALUE);
	}

	/** The peer's address as the log names it, {@code ip:port}, also once closed. */
	String describePeer() {
		return format(peer);
	}

	/** {@code address} as {@code ip:port} (an IPv6 address in brackets). */
	static String format(InetSocketAddress address) {
		InetAddress ip = address.getAddress();
		if (ip == null) {
			return address.getHostString() + ":" + address.getPort();
		}
		String host = ip.getHostAddress();
		return (ip instanceof Inet6Address ? "[" + host + "]" : host) + ":" + address.getPort();
	}

	@Override
	public String toString() {
		return "OutOfBandLink[" + format(local) + " -> " + format(peer)
				+ (closed ? ", closed" : detached ? ", socket closed after the exchange" : "") + "]";
	}

}
