package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.InitializingBean;

import dev.rdma.spring.connection.support.SharedReceives;
import dev.rdma.verbs.AsyncEvent;
import dev.rdma.verbs.AsyncEventType;
import dev.rdma.verbs.Context;

/**
 * One platform thread per device ({@code rdma-async-<device>}) reading its asynchronous
 * events ({@code ibv_get_async_event}, acknowledged by the binding), logging them and
 * recording CQ errors and port changes in a {@link DeviceEvents} per device for the
 * health indicator and the metrics, and handing the events of a server's shared receive
 * queue to it ({@link SharedReceives#onAsyncEvent}: SRQ_LIMIT_REACHED refills it). The
 * threads stop (woken with {@link Context#wakeAsyncWaiter()}) before the contexts are
 * closed: this bean depends on every device bean.
 */
public class RdmaAsyncEventMonitor implements InitializingBean, DisposableBean {

	private static final Log logger = LogFactory.getLog(RdmaAsyncEventMonitor.class);

	private static final Duration POLL = Duration.ofMillis(200);

	private final RdmaResources resources;

	private final List<String> deviceKeys;

	private final Map<String, DeviceEvents> events = new LinkedHashMap<>();

	private final List<Thread> threads = new ArrayList<>();

	private volatile boolean running;

	public RdmaAsyncEventMonitor(RdmaResources resources, List<String> deviceKeys) {
		this.resources = resources;
		this.deviceKeys = List.copyOf(deviceKeys);
		deviceKeys.forEach(k -> events.put(k, new DeviceEvents()));
	}

	@Override
	public void afterPropertiesSet() {
		running = true;
		Map<String, Context> contexts = resources.contexts();
		for (String key : deviceKeys) {
			Context context = contexts.get(key);
			if (context == null) {
				continue;
			}
			DeviceEvents state = events.get(key);
			Thread thread = Thread.ofPlatform()
				.name("rdma-async-" + context.deviceName())
				.daemon(true)
				.unstarted(() -> loop(key, context, state));
			threads.add(thread);
			thread.start();
		}
	}

	private void loop(String key, Context context, DeviceEvents state) {
		while (running) {
			AsyncEvent event;
			try {
				event = context.getAsyncEvent(POLL);
			}
			catch (IllegalStateException ex) {
				return; // context closed
			}
			catch (RuntimeException ex) {
				logger.warn("Reading async events of device " + context.deviceName() + " failed", ex);
				sleep();
				continue;
			}
			if (event != null) {
				record(key, context, state, event);
			}
		}
	}

	private void record(String key, Context context, DeviceEvents state, AsyncEvent event) {
		state.total.incrementAndGet();
		state.lastEvent = event.type() + " at " + Instant.now();
		switch (event.type()) {
			case CQ_ERR -> {
				state.cqErrors.incrementAndGet();
				String queue = resources.queueName(event.completionQueue());
				logger.error("Completion queue " + (queue == null ? "(not configured)" : "'" + queue + "'")
						+ " of device " + context.deviceName() + " reported " + event.description()
						+ " (IBV_EVENT_CQ_ERR, usually an overrun: more completions than entries); the queue is unusable");
			}
			case PORT_ERR -> {
				state.portErrors.incrementAndGet();
				state.lastPortEvent = event.type();
				logger.warn("Port " + event.portNumber() + " of device " + context.deviceName() + " (" + key
						+ ") went down: " + event.description());
			}
			case PORT_ACTIVE -> {
				state.portActive.incrementAndGet();
				state.lastPortEvent = event.type();
				logger.info("Port " + event.portNumber() + " of device " + context.deviceName() + " (" + key
						+ ") is active: " + event.description());
			}
			case SRQ_LIMIT_REACHED, SRQ_ERR -> {
				// a server's shared receive queue: refilled (limit armed again), or
				// logged
				if (!SharedReceives.onAsyncEvent(event)) {
					logger.info("Async event on device " + context.deviceName() + ": " + event.type() + " ("
							+ event.description() + ")");
				}
			}
			default -> logger.info("Async event on device " + context.deviceName() + ": " + event.type() + " ("
					+ event.description() + ")");
		}
	}

	private static void sleep() {
		try {
			Thread.sleep(POLL);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
		}
	}

	/** The events recorded for the device of {@code rdma.devices.<key>}. */
	public @Nullable DeviceEvents events(String deviceKey) {
		return events.get(deviceKey);
	}

	@Override
	public void destroy() throws InterruptedException {
		running = false;
		resources.contexts().values().forEach(c -> {
			try {
				c.wakeAsyncWaiter();
			}
			catch (RuntimeException ex) {
				// already closed
			}
		});
		for (Thread thread : threads) {
			thread.join(2000);
			if (thread.isAlive()) {
				logger.warn(thread.getName() + " did not stop within 2 s");
			}
		}
	}

	/** Asynchronous events of one device. */
	public static final class DeviceEvents {

		final AtomicLong total = new AtomicLong();

		final AtomicLong cqErrors = new AtomicLong();

		final AtomicLong portErrors = new AtomicLong();

		final AtomicLong portActive = new AtomicLong();

		volatile @Nullable AsyncEventType lastPortEvent;

		volatile @Nullable String lastEvent;

		public long total() {
			return total.get();
		}

		public long cqErrors() {
			return cqErrors.get();
		}

		public long portErrors() {
			return portErrors.get();
		}

		public long portActive() {
			return portActive.get();
		}

		/** PORT_ACTIVE or PORT_ERR, whichever came last, or null. */
		public @Nullable AsyncEventType lastPortEvent() {
			return lastPortEvent;
		}

		/** The last event and when it came, or null. */
		public @Nullable String lastEvent() {
			return lastEvent;
		}

	}

}
