package com.example.demo;

import java.time.Duration;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.stereotype.Component;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;

/**
 * Not from the README: the test's traffic. Once the application is ready, sends
 * {@value #MESSAGES} messages over an RC queue pair connected to itself whose send and
 * receive completions both land on the README's "rx" queue, in rounds that fit the queue
 * pair, and waits for the README's listener to have seen each round.
 */
@Component
class LoopbackTraffic implements ApplicationListener<ApplicationReadyEvent>, DisposableBean {

	static final int MESSAGES = 100;

	private static final int ROUND = 20;

	private final LoopbackQueuePair qp;

	private final RxListener listener;

	LoopbackTraffic(Context nic0, @Qualifier("rx") CompletionQueue rx, RxListener listener) {
		this.qp = new LoopbackQueuePair(nic0, rx, rx, 2 * ROUND, 64);
		this.listener = listener;
	}

	@Override
	public void onApplicationEvent(ApplicationReadyEvent event) {
		Thread.ofPlatform().name("fresh-app-traffic").start(this::send);
	}

	private void send() {
		long deadline = System.nanoTime() + Duration.ofMinutes(5).toNanos();
		try {
			for (int sent = 0; sent < MESSAGES; sent += ROUND) {
				for (int i = 0; i < ROUND; i++) {
					this.qp.postRecv(sent + i, i);
					this.qp.postSend(sent + i, i, 64, null);
				}
				while (this.listener.received() < 2L * (sent + ROUND)) {
					if (System.nanoTime() > deadline) {
						throw new IllegalStateException("only " + this.listener.received() + " completions");
					}
					Thread.sleep(1);
				}
			}
			System.out.println("fresh-app: " + this.listener.received() + " completions received by the listener");
		}
		catch (InterruptedException | RuntimeException ex) {
			System.out.println("fresh-app: traffic FAILED: " + ex);
		}
	}

	@Override
	public void destroy() {
		this.qp.close();
	}

}
