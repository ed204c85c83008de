package dev.rdma.spring.boot.autoconfigure;

import java.util.Set;
import java.util.TreeSet;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.jspecify.annotations.NullMarked;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The package structure of this module (docs/architecture.md), checked on its compiled
 * classes with ArchUnit: no package cycle, the dependencies one way only (Boot's
 * auto-configuration on the listener infrastructure, never the reverse; health and
 * metrics on the root auto-configuration, never the reverse), and {@code @NullMarked} on
 * every package. ArchUnit's own JUnit 5 engine is built for JUnit platform 1.x, so its
 * core runs in this Jupiter test.
 */
class ArchitectureTests {

	private static final String BASE = "dev.rdma.spring";

	private static final String BOOT = BASE + ".boot.autoconfigure";

	private static JavaClasses classes;

	@BeforeAll
	static void importClasses() {
		classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
			.importPackages(BASE);
	}

	private static Set<String> packages() {
		Set<String> packages = new TreeSet<>();
		for (JavaClass type : classes) {
			packages.add(type.getPackageName());
		}
		return packages;
	}

	@Test
	void theModuleHasTheDocumentedPackages() {
		assertThat(packages()).containsExactly(BASE, BASE + ".annotation", BOOT, BOOT + ".health", BOOT + ".metrics",
				BASE + ".config", BASE + ".connection", BASE + ".connection.event", BASE + ".connection.support",
				BASE + ".listener");
	}

	@Test
	void noPackageCycle() {
		// every package is a slice of its own: dev.rdma.(**) captures the whole package
		// name below dev.rdma
		slices().matching("dev.rdma.(**)").should().beFreeOfCycles().check(classes);
	}

	@Test
	void theListenerInfrastructureDoesNotKnowSpringBoot() {
		noClasses().that()
			.resideInAnyPackage(BASE, BASE + ".annotation", BASE + ".config", BASE + ".listener",
					BASE + ".connection..")
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BOOT + "..", "org.springframework.boot..")
			.check(classes);
	}

	@Test
	void theConnectionApiIsApartFromItsPlumbing() {
		// what users inject and receive (RdmaConnection, RdmaMessage) knows neither the
		// plumbing nor Spring; the plumbing knows the listener infrastructure, not the
		// annotations
		noClasses().that()
			.resideInAPackage(BASE + ".connection")
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BASE + ".connection.support", "org.springframework..", BASE + ".listener",
					BASE + ".config")
			.check(classes);
		// the events know the API and Spring's ApplicationEvent, not the plumbing
		noClasses().that()
			.resideInAPackage(BASE + ".connection.event")
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BASE + ".connection.support", BASE + ".listener", BASE + ".config",
					BASE + ".annotation")
			.check(classes);
		noClasses().that()
			.resideInAPackage(BASE + ".connection.support")
			.should()
			.dependOnClassesThat()
			.resideInAPackage(BASE + ".annotation")
			.check(classes);
		noClasses().that()
			.resideInAnyPackage(BASE + ".listener", BASE + ".config")
			.should()
			.dependOnClassesThat()
			.resideInAPackage(BASE + ".connection..")
			.check(classes);
	}

	@Test
	void listenerInfrastructureLayersPointDownwards() {
		// annotation -> config -> listener -> dev.rdma.verbs
		noClasses().that()
			.resideInAPackage(BASE + ".listener")
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BASE + ".config", BASE + ".annotation")
			.check(classes);
		noClasses().that()
			.resideInAPackage(BASE + ".config")
			.should()
			.dependOnClassesThat()
			.resideInAPackage(BASE + ".annotation")
			.check(classes);
		noClasses().that()
			.resideInAPackage(BASE)
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BASE + ".annotation", BASE + ".config", BASE + ".listener")
			.check(classes);
	}

	@Test
	void theRootAutoConfigurationKnowsNeitherHealthNorMetrics() {
		noClasses().that()
			.resideInAPackage(BOOT)
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(BOOT + ".health", BOOT + ".metrics")
			.check(classes);
		noClasses().that()
			.resideInAPackage(BOOT + ".health")
			.should()
			.dependOnClassesThat()
			.resideInAPackage(BOOT + ".metrics")
			.check(classes);
		noClasses().that()
			.resideInAPackage(BOOT + ".metrics")
			.should()
			.dependOnClassesThat()
			.resideInAPackage(BOOT + ".health")
			.check(classes);
	}

	@Test
	void theBindingsAreUsedOnlyThroughWhatTheirModuleExports() {
		// dev.rdma.verbs exports dev.rdma.verbs and dev.rdma.verbs.efa to everyone, its
		// benchmark seam to dev.rdma.benchmarks only, its FFM plumbing to no one. On the
		// class path (how Boot runs) only this rule enforces it.
		noClasses().that()
			.resideInAPackage(BASE + "..")
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage("dev.rdma.verbs.ffm..", "dev.rdma.verbs.seam..")
			.check(classes);
	}

	@Test
	void everyPackageIsNullMarked() throws ClassNotFoundException {
		for (String name : packages()) {
			Class<?> info = Class.forName(name + ".package-info");
			assertThat(info.isAnnotationPresent(NullMarked.class)).as(name + " is @NullMarked").isTrue();
		}
	}

}
