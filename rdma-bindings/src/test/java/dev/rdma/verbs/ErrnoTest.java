package dev.rdma.verbs;

import java.lang.reflect.Modifier;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * How the binding's error messages name an errno: every constant by its own name and
 * number with the C library's text, a number without a constant plainly, and the
 * provider's codes and a missing errno as what they are. The constants' values are proven
 * against the C headers by {@code LayoutConformanceTest}.
 */
class ErrnoTest {

	@Test
	void everyConstantIsNamedByItsOwnName() throws IllegalAccessException {
		int constants = 0;
		for (var f : Errno.class.getFields()) {
			if (f.getType() == int.class && Modifier.isStatic(f.getModifiers())) {
				int errno = f.getInt(null);
				assertThat(Errno.name(errno)).as(f.getName()).isEqualTo(f.getName());
				assertThat(Errno.describe(errno)).as(f.getName()).startsWith(f.getName() + " (" + errno + "): ");
				constants++;
			}
		}
		assertThat(constants).isGreaterThanOrEqualTo(50);
	}

	@Test
	void describesWithTheCLibrarysText() {
		assertThat(Errno.describe(Errno.EBADF)).isEqualTo("EBADF (9): Bad file descriptor");
		assertThat(Errno.describe(Errno.ECONNREFUSED)).isEqualTo("ECONNREFUSED (111): Connection refused");
		assertThat(Errno.describe(Errno.ETIMEDOUT)).isEqualTo("ETIMEDOUT (110): Connection timed out");
	}

	@Test
	void aNumberWithoutAConstantIsNamedPlainly() {
		assertThat(Errno.name(200)).isEqualTo("errno 200");
		assertThat(Errno.describe(200)).isEqualTo("errno 200: Unknown error 200");
	}

	@Test
	void providerCodesAndAMissingErrnoSayWhatTheyAre() {
		assertThat(Errno.describe(0)).isEqualTo("errno 0: unknown provider failure (errno not set)");
		assertThat(Errno.describe(-3)).isEqualTo("provider code -3: provider-specific failure, not an errno");
	}

}
