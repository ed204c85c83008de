package dev.rdma.verbs.testing;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import dev.rdma.verbs.NativeObjects;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code @ExtendWith(NoNativeLeaks.class)}: each test ends with as many native objects
 * open ({@link NativeObjects#open()}) as before it, whatever it created or how it failed.
 * The baseline is taken before the class's own {@code @BeforeEach} methods, the check
 * made after its {@code @AfterEach} methods.
 */
public final class NoNativeLeaks implements BeforeEachCallback, AfterEachCallback {

	private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(NoNativeLeaks.class);

	@Override
	public void beforeEach(ExtensionContext context) {
		context.getStore(NAMESPACE).put("open", NativeObjects.open());
	}

	@Override
	public void afterEach(ExtensionContext context) {
		long before = context.getStore(NAMESPACE).get("open", Long.class);
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(before);
	}

}
