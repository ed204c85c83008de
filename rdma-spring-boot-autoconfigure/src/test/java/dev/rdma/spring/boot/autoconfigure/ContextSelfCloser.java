package dev.rdma.spring.boot.autoconfigure;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.jspecify.annotations.Nullable;

import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A bean whose listener closes its own application context on its first call (the device
 * tests of a shutdown that runs on a poller thread): records the thread, how long the
 * close took and what it threw.
 */
public class ContextSelfCloser implements ApplicationContextAware {

	/** Counted down once the close from the listener returned. */
	public final CountDownLatch closed = new CountDownLatch(1);

	/** What the close threw, or null. */
	public final AtomicReference<@Nullable Throwable> failure = new AtomicReference<>();

	/** The thread that closed the context (the listener's). */
	public final AtomicReference<@Nullable Thread> thread = new AtomicReference<>();

	/** How long the close took, in nanoseconds. */
	public volatile long closeNanos = Long.MAX_VALUE;

	private final AtomicBoolean first = new AtomicBoolean(true);

	private @Nullable ConfigurableApplicationContext context;

	@Override
	public void setApplicationContext(ApplicationContext applicationContext) {
		this.context = (ConfigurableApplicationContext) applicationContext;
	}

	/** Closes the context on the first call; later calls do nothing. */
	protected final void closeOnFirstCall() {
		if (!first.getAndSet(false)) {
			return;
		}
		thread.set(Thread.currentThread());
		long start = System.nanoTime();
		try {
			ConfigurableApplicationContext c = context;
			if (c != null) {
				c.close();
			}
		}
		catch (Throwable ex) {
			failure.set(ex);
		}
		finally {
			closeNanos = System.nanoTime() - start;
			closed.countDown();
		}
	}

}
