package dev.rdma.verbs.efa;

import dev.rdma.verbs.BitFlag;
import dev.rdma.verbs.CqInitAttributes;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.StandIns;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.testing.StandInCq;
import dev.rdma.verbs.testing.StandInLibrary;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The EFA readers ({@code efadv_wc_read_sgid}, {@code efadv_wc_is_unsolicited}), which no
 * device here can exercise, against a native stand-in: memory laid out as
 * {@code struct ibv_cq_ex} and {@code struct efadv_cq} whose function pointers are the C
 * functions of {@link StandInLibrary}, which record each call and return known values.
 */
class EfaStandInTest {

	@RegisterExtension
	final StandInCq standIn = new StandInCq();

	private EfaCompletionQueue efaCq(Set<EfaWcFlag> flags) {
		CqInitAttributes attributes = CqInitAttributes.of(16).withWcFlags(EnumSet.allOf(WcExFlag.class));
		return new EfaCompletionQueue(null, standIn.cq(), attributes,
				new EfaReaders(standIn.efadv(), BitFlag.mask(flags)), StandIns.calls(StandInCq.DESTROY));
	}

	private static Gid expectedGid() {
		byte[] expected = new byte[16];
		for (int i = 0; i < 16; i++) {
			expected[i] = (byte) (0xF0 + i);
		}
		return new Gid(expected);
	}

	@Test
	void efaReadersCallTheEfadvCqSlotsOnlyWhenGranted() {
		EfaCompletionQueue q = efaCq(EnumSet.of(EfaWcFlag.SGID, EfaWcFlag.IS_UNSOLICITED));
		assertThat(q.provides(EfaWcFlag.SGID)).isTrue();
		StandInLibrary.remaining(1);
		List<Object> seen = new ArrayList<>();
		q.poll(new WorkCompletionBuffer(1), wc -> {
			seen.add(q.readSgid());
			seen.add(q.isUnsolicited());
		});
		assertThat(seen).containsExactly(expectedGid(), true);
		assertThat(StandInLibrary.calls()).contains("wc_read_sgid", "wc_is_unsolicited");
		q.close();

		StandInLibrary.clear();
		EfaCompletionQueue sgidOnly = efaCq(Set.of(EfaWcFlag.SGID));
		assertThat(sgidOnly.provides(EfaWcFlag.IS_UNSOLICITED)).isFalse();
		StandInLibrary.remaining(1);
		List<Throwable> errors = new ArrayList<>();
		sgidOnly.poll(new WorkCompletionBuffer(1), wc -> {
			try {
				sgidOnly.isUnsolicited();
			}
			catch (IllegalStateException e) {
				errors.add(e);
			}
		});
		assertThat(errors).singleElement().satisfies(e -> assertThat(e).hasMessageContaining("IS_UNSOLICITED"));
		assertThat(StandInLibrary.calls()).doesNotContain("wc_is_unsolicited");
		sgidOnly.close();
	}

	@Test
	void theRawIteratorReadsTheEfaFieldsOfItsCurrentCompletion() {
		EfaCompletionQueue q = efaCq(EnumSet.of(EfaWcFlag.SGID, EfaWcFlag.IS_UNSOLICITED));
		StandInLibrary.remaining(1);
		assertThat(q.startPoll()).isTrue();
		try {
			assertThat(q.readSgid()).isEqualTo(expectedGid());
			assertThat(q.isUnsolicited()).isTrue();
		}
		finally {
			q.endPoll();
		}
		q.close();
	}

	@Test
	void theEfaFieldsAreReadOnlyWhileTheirCompletionIsCurrent() {
		EfaCompletionQueue q = efaCq(EnumSet.of(EfaWcFlag.SGID, EfaWcFlag.IS_UNSOLICITED));
		StandInLibrary.remaining(1);
		try (WorkCompletionBuffer buffer = new WorkCompletionBuffer(2)) {
			assertThat(q.poll(buffer)).isEqualTo(1);
			assertThatThrownBy(q::isUnsolicited).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("outside a poll callback");
			assertThatThrownBy(q::readSgid).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("outside a poll callback");
		}
		assertThat(StandInLibrary.calls()).doesNotContain("wc_read_sgid", "wc_is_unsolicited");
		q.close();
	}

}
