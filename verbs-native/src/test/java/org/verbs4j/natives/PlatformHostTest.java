package org.verbs4j.natives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Host tier: what the native layer takes from the machine rather than assumes: the page size
 * ({@code sysconf(_SC_PAGESIZE)}), and the architectures whose struct layouts it was verified on
 * (elsewhere it refuses to load libibverbs, with a reason that names the architecture).
 */
class PlatformHostTest {

    @Test
    void thePageSizeIsTheMachines() throws Exception {
        Process getconf = new ProcessBuilder("getconf", "PAGESIZE")
                .redirectErrorStream(true)
                .start();
        String out = new String(getconf.getInputStream().readAllBytes()).trim();
        assertTrue(getconf.waitFor(30, TimeUnit.SECONDS));
        assertEquals(Long.parseLong(out), LibC.PAGE_SIZE);
        assertEquals(1, Long.bitCount(LibC.PAGE_SIZE));
    }

    @Test
    void onlyVerifiedArchitecturesLoadTheLibraries() {
        assertEquals(Optional.empty(), NativeLibraries.architectureUnavailabilityCause("amd64"));
        for (String arch : new String[] {"aarch64", "ppc64le", "riscv64", "s390x"}) {
            Optional<String> cause = NativeLibraries.architectureUnavailabilityCause(arch);
            assertTrue(cause.isPresent(), arch);
            assertTrue(cause.get().contains(arch) && cause.get().contains("x86-64"), cause.get());
        }
        // this machine: the layouts the tests verified are the ones in use
        assertEquals(Optional.empty(), NativeLibraries.architectureUnavailabilityCause(System.getProperty("os.arch")));
    }
}
