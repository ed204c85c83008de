package dev.rdma.verbs;

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
 * The package structure of rdma-bindings (docs/architecture.md), checked on its compiled
 * classes with ArchUnit: the documented packages, no package cycle, the FFM plumbing
 * independent of the API (only the API calls into it), the API independent of the EFA
 * provider package and of the benchmarks' seam, and {@code @NullMarked} on every package.
 * (ModuleLayoutTest checks that only the API is exported.)
 */
class ArchitectureTests {

	private static final String API = "dev.rdma.verbs";

	private static final String FFM = API + ".ffm";

	private static final String EFA = API + ".efa";

	private static final String SEAM = API + ".seam";

	private static JavaClasses classes;

	@BeforeAll
	static void importClasses() {
		classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
			.importPackages(API);
	}

	@Test
	void theModuleHasTheDocumentedPackages() {
		Set<String> packages = new TreeSet<>();
		for (JavaClass type : classes) {
			packages.add(type.getPackageName());
		}
		assertThat(packages).containsExactlyInAnyOrder(API, EFA, FFM, SEAM);
	}

	@Test
	void noPackageCycle() {
		slices().matching("dev.rdma.(**)").should().beFreeOfCycles().check(classes);
	}

	@Test
	void thePlumbingKnowsNothingOfTheApi() {
		noClasses().that().resideInAPackage(FFM).should().dependOnClassesThat().resideInAPackage(API).check(classes);
	}

	@Test
	void theApiKnowsNeitherItsProviderPackagesNorTheBenchmarkSeam() {
		noClasses().that()
			.resideInAPackage(API)
			.should()
			.dependOnClassesThat()
			.resideInAnyPackage(EFA, SEAM)
			.check(classes);
	}

	@Test
	void nothingInTheBindingUsesTheBenchmarkSeam() {
		noClasses().that()
			.resideOutsideOfPackage(SEAM)
			.should()
			.dependOnClassesThat()
			.resideInAPackage(SEAM)
			.check(classes);
	}

	@Test
	void theClassCyclesThatAreNotParentAndChildStayBroken() {
		// a value copied out of a view does not know the view type
		noClasses().that()
			.belongToAnyOf(WorkCompletionSnapshot.class)
			.should()
			.dependOnClassesThat()
			.belongToAnyOf(WorkCompletion.class)
			.check(classes);
		// a CQ knows the QPs that use it only as registered native objects
		noClasses().that()
			.belongToAnyOf(CompletionQueue.class)
			.should()
			.dependOnClassesThat()
			.belongToAnyOf(QueuePair.class, ProtectionDomain.class)
			.check(classes);
		// an address handle (and its attributes) does not need the QP
		noClasses().that()
			.belongToAnyOf(AddressHandle.class)
			.should()
			.dependOnClassesThat()
			.belongToAnyOf(QueuePair.class)
			.check(classes);
	}

	@Test
	void everyPackageIsNullMarked() {
		for (String pkg : Set.of(API, EFA, FFM, SEAM)) {
			assertThat(classes.getPackage(pkg).isAnnotatedWith(NullMarked.class)).as(pkg + " is @NullMarked").isTrue();
		}
	}

}
