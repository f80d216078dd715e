package org.verbs4j;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;
import java.util.Set;
import java.util.TreeSet;

/**
 * The layering of the library modules, checked on their compiled classes (main code only: the
 * tests and the test helpers may reach anywhere). The module descriptors enforce what an
 * application sees; these rules hold the library's own code to its layers, also on the class path
 * where module boundaries do not apply.
 */
@AnalyzeClasses(
        packages = "org.verbs4j",
        importOptions = {ImportOption.DoNotIncludeTests.class, LayeringTest.LibraryOnly.class})
class LayeringTest {
    static final String NATIVES = "org.verbs4j.natives..";
    static final String GENERATED = "org.verbs4j.natives.generated..";
    static final String[] CORE = {"org.verbs4j", "org.verbs4j.pool..", "org.verbs4j.internal..", "org.verbs4j.cm.."};

    /**
     * The core classes that read or write C structs through the generated layouts (attribute
     * structs of queries and creates, the async event, address handles, UD work requests). Every
     * other core class goes through the hand-written native layer. A new use of the generated
     * bindings from core must be added here, deliberately.
     */
    static final Set<String> CORE_USERS_OF_GENERATED = Set.of(
            "org.verbs4j.AddressVector",
            "org.verbs4j.AsyncEventDispatcher",
            "org.verbs4j.Capabilities",
            "org.verbs4j.cm.CmStructs",
            "org.verbs4j.Context",
            "org.verbs4j.DeviceAttributes",
            "org.verbs4j.OnDemandPaging",
            "org.verbs4j.PortAttributes",
            "org.verbs4j.ProtectionDomain",
            "org.verbs4j.QueuePair",
            "org.verbs4j.QueuePairTransitions");

    /**
     * Only the library modules' main classes: not verbs-native's test-jar (its tests and the test
     * helpers of org.verbs4j.testing), which DoNotIncludeTests does not recognise as tests.
     */
    static final class LibraryOnly implements ImportOption {
        @Override
        public boolean includes(com.tngtech.archunit.core.importer.Location location) {
            return !location.contains("-tests.jar") && !location.contains("/org/verbs4j/testing/");
        }
    }

    @ArchTest
    static final ArchRule nativesNeverUsesCore = noClasses()
            .that()
            .resideInAPackage(NATIVES)
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(CORE)
            .because("verbs-native is the lower layer: core installs what natives needs from it as a service");

    @ArchTest
    static final ArchRule coreNeverUsesGpuDirectBenchmarksOrTestHelpers = noClasses()
            .that()
            .resideInAnyPackage(CORE)
            .should()
            .dependOnClassesThat()
            .resideInAnyPackage(
                    "org.verbs4j.gpudirect..", "org.verbs4j.bench..", "org.verbs4j.perf..", "org.verbs4j.testing..")
            .because("gpudirect and the benchmarks build on core, never the other way round");

    @ArchTest
    static final ArchRule generatedOnlyThroughTheNativeLayer = noClasses()
            .that(DescribedPredicate.not(nativeLayerOrListed()))
            .should()
            .dependOnClassesThat()
            .resideInAPackage(GENERATED)
            .because("the jextract bindings are reached through org.verbs4j.natives; core classes that need "
                    + "struct layouts are listed in CORE_USERS_OF_GENERATED");

    @ArchTest
    static final ArchRule librariesDependOnJavaSlf4jAndThemselves = classes()
            .that()
            .resideInAPackage("org.verbs4j..")
            .should()
            .onlyDependOnClassesThat()
            .resideInAnyPackage("java..", "org.slf4j..", "org.verbs4j..")
            .because("the library modules need nothing at run time but the JDK and slf4j-api");

    /** The list above is exact: a listed class that no longer uses the bindings is taken off it. */
    @ArchTest
    static void theListOfCoreUsersOfGeneratedIsExact(JavaClasses classes) {
        Set<String> users = new TreeSet<>();
        for (JavaClass c : classes) {
            if (!c.getPackageName().startsWith("org.verbs4j.natives")
                    && c.getDirectDependenciesFromSelf().stream()
                            .anyMatch(d ->
                                    d.getTargetClass().getPackageName().startsWith("org.verbs4j.natives.generated"))) {
                users.add(topLevel(c.getName()));
            }
        }
        assertFalse(classes.isEmpty());
        assertEquals(new TreeSet<>(CORE_USERS_OF_GENERATED), users);
    }

    private static DescribedPredicate<JavaClass> nativeLayerOrListed() {
        return DescribedPredicate.describe(
                "in the native layer or listed in CORE_USERS_OF_GENERATED",
                c -> c.getPackageName().startsWith("org.verbs4j.natives")
                        || CORE_USERS_OF_GENERATED.contains(topLevel(c.getName())));
    }

    private static String topLevel(String binaryName) {
        int dollar = binaryName.indexOf('$');
        return dollar < 0 ? binaryName : binaryName.substring(0, dollar);
    }
}
