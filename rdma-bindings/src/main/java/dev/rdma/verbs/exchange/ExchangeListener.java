package dev.rdma.verbs.exchange;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.jspecify.annotations.Nullable;

/**
 * The server side's TCP listening socket of an out-of-band exchange (what
 * {@code ibv_rc_pingpong} without a server name listens on). Bound when created, so a
 * client may connect before {@link OutOfBand#accept} is called; each accept takes one
 * peer. {@link #close()} is idempotent and, from another thread, ends a pending accept
 * with an {@link ExchangeException}. Thread-safe: concurrent accepts on one listener each
 * wait at most their own timeout (each waits on a selector of its own over the
 * non-blocking listening channel; none holds a lock while it waits), and each connection
 * goes to one of them.
 */
public final class ExchangeListener implements AutoCloseable {

	private final ServerSocketChannel channel;

	private final InetSocketAddress address;

	/** The selectors of the accepts in progress, woken by {@link #close()}. */
	private final Set<Selector> waiting = ConcurrentHashMap.newKeySet();

	private volatile boolean closed;

	private ExchangeListener(ServerSocketChannel channel, InetSocketAddress address) {
		this.channel = channel;
		this.address = address;
	}

	/**
	 * Binds to {@code address} (port 0: any free port, see {@link #port()}), with
	 * {@code SO_REUSEADDR} as {@code ibv_rc_pingpong} sets it.
	 * @throws UncheckedIOException when the address cannot be bound
	 */
	public static ExchangeListener bind(InetSocketAddress address) {
		ServerSocketChannel c = null;
		try {
			c = ServerSocketChannel.open();
			c.setOption(StandardSocketOptions.SO_REUSEADDR, true);
			c.bind(address);
			c.configureBlocking(false);
			return new ExchangeListener(c, (InetSocketAddress) c.getLocalAddress());
		}
		catch (IOException e) {
			closeQuietly(c);
			throw new UncheckedIOException("cannot listen on " + address + ": " + e.getMessage(), e);
		}
	}

	/** The bound TCP port. */
	public int port() {
		return address.getPort();
	}

	/** The bound address. */
	public InetSocketAddress address() {
		return address;
	}

	/**
	 * The next peer, within {@code timeout} measured from this call, whatever other
	 * threads accept on this listener at the same time. The socket is in blocking mode;
	 * its {@code SO_TIMEOUT} bounds its reads.
	 */
	Socket accept(Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		try (Selector selector = Selector.open()) {
			waiting.add(selector);
			try {
				requireOpen();
				channel.register(selector, SelectionKey.OP_ACCEPT);
				while (true) {
					SocketChannel peer = channel.accept();
					if (peer != null) {
						peer.configureBlocking(true);
						return peer.socket();
					}
					long left = deadline - System.nanoTime();
					if (left <= 0) {
						throw new ExchangeException("no peer connected to " + address + " within " + timeout);
					}
					selector.select(ExchangeOptions.socketMillis(left));
					selector.selectedKeys().clear();
					requireOpen();
					if (Thread.currentThread().isInterrupted()) {
						throw new ExchangeException("interrupted while accepting on " + address);
					}
				}
			}
			finally {
				waiting.remove(selector);
			}
		}
		catch (ClosedChannelException e) {
			throw closedException(e);
		}
		catch (IOException e) {
			throw new ExchangeException("accept on " + address + " failed: " + e.getMessage(), e);
		}
	}

	private void requireOpen() {
		if (closed) {
			throw closedException(null);
		}
	}

	private ExchangeException closedException(@Nullable Throwable cause) {
		return new ExchangeException("the listener on " + address + " was closed", cause);
	}

	@Override
	public void close() {
		closed = true;
		closeQuietly(channel);
		for (Selector s : waiting) {
			s.wakeup();
		}
	}

	private static void closeQuietly(@Nullable ServerSocketChannel c) {
		if (c != null) {
			try {
				c.close();
			}
			catch (IOException ignored) {
				// closing a listening socket has nothing to flush
			}
		}
	}

	@Override
	public String toString() {
		return "ExchangeListener[" + address + "]";
	}

}
