package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.time.Duration;

import org.jspecify.annotations.Nullable;

/**
 * The server side's TCP listening socket of an out-of-band exchange (what
 * {@code ibv_rc_pingpong} without a server name listens on). Bound when created, so a
 * client may connect before {@link OutOfBand#accept} is called; each accept takes one
 * peer. {@link #close()} is idempotent and, from another thread, ends a pending accept
 * with an {@link ExchangeException}. Thread-safe.
 */
public final class ExchangeListener implements AutoCloseable {

	private final ServerSocket socket;

	private ExchangeListener(ServerSocket socket) {
		this.socket = socket;
	}

	/**
	 * Binds to {@code address} (port 0: any free port, see {@link #port()}).
	 * @throws UncheckedIOException when the address cannot be bound
	 */
	public static ExchangeListener bind(InetSocketAddress address) {
		ServerSocket s = null;
		try {
			s = new ServerSocket();
			s.setReuseAddress(true);
			s.bind(address);
			return new ExchangeListener(s);
		}
		catch (IOException e) {
			closeQuietly(s);
			throw new UncheckedIOException("cannot listen on " + address + ": " + e.getMessage(), e);
		}
	}

	/** The bound TCP port. */
	public int port() {
		return socket.getLocalPort();
	}

	/** The bound address. */
	public InetSocketAddress address() {
		return (InetSocketAddress) socket.getLocalSocketAddress();
	}

	/** The next peer, within {@code timeout}. */
	Socket accept(Duration timeout) {
		try {
			synchronized (this) {
				socket.setSoTimeout(ExchangeOptions.socketMillis(timeout.toNanos()));
			}
			return socket.accept();
		}
		catch (SocketTimeoutException e) {
			throw new ExchangeException("no peer connected to " + address() + " within " + timeout, e);
		}
		catch (SocketException e) {
			throw new ExchangeException("the listener on " + socket.getLocalSocketAddress() + " was closed", e);
		}
		catch (IOException e) {
			throw new ExchangeException("accept on " + address() + " failed: " + e.getMessage(), e);
		}
	}

	@Override
	public void close() {
		closeQuietly(socket);
	}

	private static void closeQuietly(@Nullable ServerSocket s) {
		if (s != null) {
			try {
				s.close();
			}
			catch (IOException ignored) {
				// closing a listening socket has nothing to flush
			}
		}
	}

	@Override
	public String toString() {
		return "ExchangeListener[" + socket.getLocalSocketAddress() + "]";
	}

}
