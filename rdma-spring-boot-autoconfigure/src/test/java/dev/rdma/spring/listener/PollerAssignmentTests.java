package dev.rdma.spring.listener;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Which thread of a poller group a queue goes to ({@link PollerAssignment}). */
class PollerAssignmentTests {

	@Test
	void aQueueOfAChannelAlreadyInTheGroupFollowsIt() {
		assertThat(PollerAssignment.choose(new int[] { 0, 5 }, 1, 0, 1)).isEqualTo(1);
	}

	@Test
	void otherwiseTheLeastLoadedThreadLowestIndexFirstWithOneVector() {
		assertThat(PollerAssignment.choose(new int[] { 2, 1, 1 }, -1, 7, 1)).isEqualTo(1);
		assertThat(PollerAssignment.choose(new int[] { 0, 0 }, -1, 1, 1)).isEqualTo(0);
	}

	@Test
	void withSeveralVectorsTiesGoToTheVectorsThread() {
		assertThat(PollerAssignment.choose(new int[] { 0, 0, 0, 0 }, -1, 2, 4)).isEqualTo(2);
		assertThat(PollerAssignment.choose(new int[] { 0, 0 }, -1, 3, 4)).isEqualTo(1);
		// the vector's thread is busier: the next least loaded one after it
		assertThat(PollerAssignment.choose(new int[] { 0, 1, 1, 0 }, -1, 1, 4)).isEqualTo(3);
	}

	@Test
	void vectorsSpreadOverTheThreads() {
		int[] loads = new int[4];
		int[] threadOfVector = new int[4];
		for (int q = 0; q < 16; q++) {
			int vector = q % 4;
			int t = PollerAssignment.choose(loads, -1, vector, 4);
			loads[t]++;
			if (q < 4) {
				threadOfVector[vector] = t;
			}
			else {
				assertThat(t).as("queue %d of vector %d", q, vector).isEqualTo(threadOfVector[vector]);
			}
		}
		assertThat(threadOfVector).containsExactlyInAnyOrder(0, 1, 2, 3);
	}

	@Test
	void aGroupHasThreads() {
		assertThatThrownBy(() -> PollerAssignment.choose(new int[0], -1, 0, 1))
			.isInstanceOf(IllegalArgumentException.class);
	}

	@Test
	void loadsNeverDifferByMoreThanOne() {
		for (int threads = 1; threads <= 16; threads++) {
			for (int vectors = 1; vectors <= 8; vectors++) {
				int[] loads = new int[threads];
				for (int q = 0; q < 600; q++) {
					loads[PollerAssignment.choose(loads, -1, (q * 7) % vectors, vectors)]++;
					int max = Arrays.stream(loads).max().orElseThrow();
					int min = Arrays.stream(loads).min().orElseThrow();
					assertThat(max - min).as("%d threads, %d vectors, %d queues", threads, vectors, q + 1)
						.isLessThanOrEqualTo(1);
				}
			}
		}
	}

}
