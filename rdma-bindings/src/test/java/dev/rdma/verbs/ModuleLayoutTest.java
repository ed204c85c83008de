package dev.rdma.verbs;

import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.file.Path;
import java.util.Set;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The module exports the public API and nothing else: the API and its EFA provider
 * package; the FFM plumbing ({@code dev.rdma.verbs.ffm}) is not exported, so on the
 * module path no code outside the binding can call a native function through it; the
 * benchmarks' seam is exported to the benchmarks only.
 */
class ModuleLayoutTest {

	@Test
	void onlyTheApiIsExported() throws Exception {
		// the binding's classes directory or jar, read as a module whatever path the
		// tests run on
		Path location = Path.of(CompletionQueue.class.getProtectionDomain().getCodeSource().getLocation().toURI());
		ModuleDescriptor descriptor = ModuleFinder.of(location)
			.findAll()
			.stream()
			.map(ModuleReference::descriptor)
			.findFirst()
			.orElseThrow(() -> new AssertionError("no module-info.class in " + location));
		assertThat(descriptor.name()).isEqualTo("dev.rdma.verbs");
		Set<String> unqualified = descriptor.exports()
			.stream()
			.filter(e -> !e.isQualified())
			.map(ModuleDescriptor.Exports::source)
			.collect(Collectors.toSet());
		assertThat(unqualified).containsExactlyInAnyOrder("dev.rdma.verbs", "dev.rdma.verbs.efa");
		assertThat(descriptor.exports()).filteredOn(ModuleDescriptor.Exports::isQualified)
			.singleElement()
			.satisfies(e -> {
				assertThat(e.source()).isEqualTo("dev.rdma.verbs.seam");
				assertThat(e.targets()).containsExactly("dev.rdma.benchmarks");
			});
		assertThat(descriptor.packages()).contains("dev.rdma.verbs.ffm");
		assertThat(descriptor.opens()).isEmpty();
		assertThat(descriptor.requires()).extracting(ModuleDescriptor.Requires::name)
			.containsExactlyInAnyOrder("java.base", "org.jspecify");
		assertThat(descriptor.requires()).filteredOn(r -> r.name().equals("org.jspecify"))
			.allSatisfy(r -> assertThat(r.modifiers()).contains(ModuleDescriptor.Requires.Modifier.STATIC));
	}

}
