package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier (no RDMA device): misuse of the public API never crashes the JVM and is refused with
 * the documented {@link VerbsException} (verb, errno, and a message that says what to do).
 * Queue pairs, regions and queues are verbs4j wrappers around the stand-in provider's fake
 * objects ({@link ForeignHandles} + verbs-native's StandInProvider, see {@link StandInProvider}), so the checked-mode paths and the
 * real dispatch into a provider's post_send/poll_cq run without hardware.
 */
class HostMisuseTest {

    /** Asserts that {@code call} throws a VerbsException for {@code verb} with {@code errno} whose message holds every hint. */
    static VerbsException refused(String verb, int errno, Executable call, String... says) {
        VerbsException e = assertThrows(VerbsException.class, call);
        assertEquals(verb, e.verb(), e.getMessage());
        UserMessages.check(e);
        assertEquals(errno, e.errno(), e.getMessage());
        assertTrue(e.getMessage().startsWith(verb + " failed: " + Errno.name(errno)), e.getMessage());
        for (String s : says) {
            assertTrue(e.getMessage().contains(s), "'" + s + "' not in: " + e.getMessage());
        }
        return e;
    }

    // ---- no device, no stand-in ----------------------------------------------------------

    @Test
    void workRequestArraysRefuseUseAfterCloseAndDoubleClose() {
        SendWorkRequests sends = new SendWorkRequests(4, 2);
        sends.close();
        refused("ibv_post_send", Errno.EBADF, () -> sends.send(1), "closed", "create a new one");
        refused("ibv_post_send", Errno.EBADF, () -> sends.write(1, 0, 0), "closed");
        refused("SendWorkRequests.close", Errno.EBADF, sends::close, "close it once");
        assertEquals(0, sends.size());

        ReceiveWorkRequests recvs = new ReceiveWorkRequests(4, 2);
        recvs.close();
        refused("ibv_post_recv", Errno.EBADF, () -> recvs.add(1), "closed", "create a new one");
        refused("ReceiveWorkRequests.close", Errno.EBADF, recvs::close, "close it once");

        WorkCompletions wcs = new WorkCompletions(4);
        wcs.close();
        assertEquals(0, wcs.count());
        assertThrows(InvalidRequestException.class, () -> wcs.wrId(0), "nothing to read after close");
        refused("WorkCompletions.close", Errno.EBADF, wcs::close, "close it once");
    }

    @Test
    void chainCapacityAndSgeLimitsAreRefused() {
        try (SendWorkRequests sends = new SendWorkRequests(1, 1)) {
            sends.send(1);
            refused("ibv_post_send", Errno.ENOMEM, () -> sends.send(2), "capacity of 1", "clear()");
            assertThrows(
                    InvalidRequestException.class,
                    () -> new SendWorkRequests(2, 1).inline(MemorySegment.NULL),
                    "an SGE before any request");
        }
        assertThrows(InvalidRequestException.class, () -> new SendWorkRequests(0, 1));
        assertThrows(InvalidRequestException.class, () -> new ReceiveWorkRequests(1, 0));
        assertThrows(InvalidRequestException.class, () -> new WorkCompletions(0));
    }

    @Test
    void devicesIsEmptyWithACauseOrListsDevices() {
        List<DeviceInfo> devices = assertDoesNotThrow(Verbs::devices);
        Optional<String> cause = Verbs.unavailabilityCause();
        if (cause.isPresent()) {
            assertTrue(devices.isEmpty(), "a cause " + cause.get() + " but devices " + devices);
            assertFalse(cause.get().isBlank());
            assertFalse(Verbs.isAvailable());
            System.out.println("Verbs.unavailabilityCause(): " + cause.get());
            refused("ibv_get_device_list", Errno.ENODEV, Verbs::ensureAvailable, cause.get());
        } else {
            assertFalse(devices.isEmpty(), "no cause but no device either");
        }
    }

    @Test
    void openingAMissingDeviceNamesTheVerb() {
        VerbsException e = assertThrows(VerbsException.class, () -> Verbs.open("x"));
        assertTrue(e.verb().startsWith("ibv_") || e.verb().startsWith("dlopen"), e.verb());
        assertTrue(e.errno() > 0, e.getMessage());
        assertTrue(e.getMessage().startsWith(e.verb() + " failed"), e.getMessage());
        System.out.println("Verbs.open(\"x\"): " + e.getMessage());
    }

    @Test
    void connectOptionsRefuseUnboundedRetriesAndInfiniteTimeouts() {
        ConnectOptions ok = ConnectOptions.roce(1);
        assertEquals(6, ok.retryCount());
        assertTrue(ok.rnrRetry() > 0 && ok.rnrRetry() < 7);
        InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> ok.withRetry(7, 6));
        assertTrue(e.getMessage().contains("retryCount"), e.getMessage());
        e = assertThrows(InvalidRequestException.class, () -> ok.withRetry(6, 7));
        assertTrue(
                e.getMessage().contains("rnrRetry") && e.getMessage().contains("withRnrRetryForever"), e.getMessage());
        e = assertThrows(InvalidRequestException.class, () -> ok.withTimeout(0));
        assertTrue(e.getMessage().contains("timeout"), e.getMessage());
        assertDoesNotThrow(() -> ok.withRetry(0, 1).withTimeout(31));
        // an unbounded RNR retry only when asked for by name, and the transport retry stays bounded
        ConnectOptions rnr = ok.withRnrRetryForever();
        assertEquals(7, rnr.rnrRetry());
        assertEquals(6, rnr.retryCount());
        e = assertThrows(InvalidRequestException.class, () -> new ConnectOptions(14, 6, 8, 12, 0, null, 1, 64, 0, 0));
        assertTrue(e.getMessage().contains("rnrRetry"), e.getMessage());
    }

    @Test
    void completionStatusTextsAreLibibverbsOwn() {
        // the texts come from ibv_wc_status_str; without libibverbs this fails with a VerbsException, not a crash
        org.junit.jupiter.api.Assumptions.assumeTrue(
                org.verbs4j.natives.NativeLibraries.ibverbsUnavailabilityCause().isEmpty(), "no libibverbs here");
        assertEquals("success", CompletionStatus.text(CompletionStatus.SUCCESS));
        assertEquals("Work Request Flushed Error", CompletionStatus.text(CompletionStatus.WR_FLUSH_ERR));
        assertEquals("remote access error", CompletionStatus.text(CompletionStatus.REM_ACCESS_ERR));
    }

    // ---- through the stand-in provider -----------------------------------------------------

    @Nested
    @NeedsNativeToolchain
    class WithStandInProvider {
        private StandInProvider p;
        private Arena arena;
        private Context ctx;
        private ProtectionDomain pd;
        private CompletionQueue cq;
        private MemoryRegion mr;
        private StandInObjects o;

        @BeforeEach
        void open() {
            o = StandInObjects.open();
            p = o.p;
            arena = o.arena;
            ctx = o.ctx;
            pd = o.pd;
            cq = o.cq;
            mr = o.mr;
        }

        @AfterEach
        void close() {
            o.close();
        }

        private QueuePair qp(QueuePairInit init, QueuePairState state) {
            return ForeignHandles.queuePair(pd, p.qp(), init, state);
        }

        private QueuePairInit rc() {
            return QueuePairInit.of(QueuePairType.RC, cq)
                    .maxSendSge(1)
                    .maxRecvSge(1)
                    .maxInlineData(16);
        }

        @Test
        void aChainOfThreeWritesReachesTheProviderAndCompletes() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(8, 1);
                    WorkCompletions wcs = new WorkCompletions(8)) {
                long remote = 0x7f00_0000_1000L;
                for (int i = 0; i < 3; i++) {
                    wrs.write(11 + i, remote + 64L * i, 0xabcd)
                            .sge(mr, 64L * i, 64)
                            .signaled();
                }
                qp.postSend(wrs);
                assertEquals(1, p.calls(StandInProvider.Op.POST_SEND));
                assertEquals(qp.handle().address(), p.lastQp());
                assertEquals(wrs.segment().address(), p.lastWr(), "the chain's first WR went to post_send");
                assertEquals(3, p.wqeCount());
                for (int i = 0; i < 3; i++) {
                    StandInProvider.Wqe w = p.wqe(i);
                    assertEquals(11 + i, w.wrId());
                    assertEquals(SendWorkRequests.OP_RDMA_WRITE, w.opcode());
                    assertEquals(SendWorkRequests.FLAG_SIGNALED, w.sendFlags());
                    assertEquals(remote + 64L * i, w.remoteAddr());
                    assertEquals(0xabcd, w.rkey());
                    assertEquals(mr.address() + 64L * i, w.addr());
                    assertEquals(64, w.length());
                    assertEquals(0x1111, w.lkey());
                    assertEquals(1, w.numSge());
                }
                assertEquals(3, cq.poll(wcs, 3, Duration.ofSeconds(5)));
                for (int i = 0; i < 3; i++) {
                    assertEquals(11 + i, wcs.wrId(i));
                    assertTrue(wcs.isSuccess(i));
                    assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(i));
                    assertEquals(64, wcs.byteLength(i));
                    assertEquals(StandInProvider.QP_NUM, wcs.qpNumber(i));
                }
                assertEquals(0, cq.poll(wcs), "nothing more");
                // the chain is reusable after the post: the same three again
                qp.postSend(wrs);
                assertEquals(6, p.wqeCount());
                assertEquals(3, cq.poll(wcs, 3, Duration.ofSeconds(5)));
            } finally {
                qp.close();
            }
        }

        @Test
        void postingFromAClosedRegionIsRefused() {
            MemoryRegion other =
                    ForeignHandles.memoryRegion(pd, arena.allocate(256), 1, 2, EnumSet.noneOf(Access.class));
            other.close();
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                refused(
                        "ibv_post_send",
                        Errno.EBADF,
                        () -> wrs.send(1).sge(other, 0, 16),
                        "memory region is closed",
                        "do not use a memory region after close()");
            }
            refused("ibv_dereg_mr", Errno.EBADF, other::close, "already closed", "close each object exactly once");
            refused("MemoryRegion.handle", Errno.EBADF, other::handle, "closed");
        }

        @Test
        void anSgeOutsideTheRegionIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1);
                    ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 1)) {
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.send(1).sge(mr, 4000, 200),
                        "outside the registered region",
                        "register a larger one");
                refused("ibv_post_send", Errno.EINVAL, () -> wrs.clear().send(1).sge(mr, -1, 1), "outside");
                refused("ibv_post_recv", Errno.EINVAL, () -> rwrs.add(1).sge(mr, 4096, 1), "outside");
            }
        }

        @Test
        void aRegionWhoseArenaWasClosedIsRefused() {
            Arena gone = Arena.ofConfined();
            MemoryRegion stale =
                    ForeignHandles.memoryRegion(pd, gone.allocate(128), 3, 4, EnumSet.of(Access.LOCAL_WRITE));
            gone.close();
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1);
                    ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 1)) {
                refused(
                        "ibv_post_send",
                        Errno.EFAULT,
                        () -> wrs.send(1).sge(stale, 0, 16),
                        "arena is closed",
                        "keep the arena open");
                refused("ibv_post_recv", Errno.EFAULT, () -> rwrs.add(1).sge(stale, 0, 16), "arena is closed");
            } finally {
                stale.close();
            }
        }

        @Test
        void registrationRefusalsOnAProtectionDomain() {
            refused(
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(MemorySegment.ofArray(new byte[64])),
                    "heap segment",
                    "allocate the buffer from an Arena");
            refused(
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(arena.allocate(64), Access.REMOTE_WRITE),
                    "need LOCAL_WRITE",
                    "add Access.LOCAL_WRITE");
            refused(
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(arena.allocate(64), Access.REMOTE_ATOMIC),
                    "need LOCAL_WRITE");
            Arena gone = Arena.ofConfined();
            MemorySegment dead = gone.allocate(64);
            gone.close();
            refused(
                    "ibv_reg_mr",
                    Errno.EFAULT,
                    () -> pd.register(dead, Access.LOCAL_WRITE),
                    "arena is closed",
                    "register live memory");
            refused(
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(arena.allocate(1).asSlice(0, 0)),
                    "empty");
            refused(
                    "ibv_reg_mr_iova2",
                    Errno.EINVAL,
                    () -> pd.register(MemorySegment.ofArray(new long[8]), 0L, EnumSet.of(Access.LOCAL_WRITE)),
                    "heap segment");
            assertEquals(1, pd.liveChildren(), "nothing was registered but the fixture's region");
        }

        @Test
        void postingOnAClosedQueuePairIsRefused() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            qp.close();
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1);
                    ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 1)) {
                wrs.send(1).sge(mr, 0, 8);
                rwrs.add(1).sge(mr, 0, 8);
                refused(
                        "ibv_post_send",
                        Errno.EBADF,
                        () -> qp.postSend(wrs),
                        "queue pair is closed",
                        "do not use a queue pair after close()");
                refused("ibv_post_recv", Errno.EBADF, () -> qp.postRecv(rwrs), "queue pair is closed");
            }
            refused("ibv_destroy_qp", Errno.EBADF, qp::close, "already closed", "close each object exactly once");
            refused("ibv_modify_qp", Errno.EBADF, qp::toError, "closed");
            assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
            assertEquals(0, p.calls(StandInProvider.Op.POST_RECV));
        }

        @Test
        void postingAClosedChainIsRefused() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            try {
                SendWorkRequests wrs = new SendWorkRequests(2, 1);
                wrs.send(1).sge(mr, 0, 8);
                wrs.close();
                refused("ibv_post_send", Errno.EBADF, () -> qp.postSend(wrs), "SendWorkRequests is closed");
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 1);
                rwrs.close();
                refused("ibv_post_recv", Errno.EBADF, () -> qp.postRecv(rwrs), "ReceiveWorkRequests is closed");
                WorkCompletions wcs = new WorkCompletions(2);
                wcs.close();
                refused("ibv_poll_cq", Errno.EBADF, () -> cq.poll(wcs), "WorkCompletions array is closed");
                refused("ibv_poll_cq", Errno.EBADF, () -> cq.poll(wcs, 1, Duration.ofMillis(10)), "closed");
                assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
                assertEquals(0, p.calls(StandInProvider.Op.POLL_CQ));
            } finally {
                qp.close();
            }
        }

        @Test
        void sendsBeforeRtsAreRefusedInCheckedMode() {
            assertTrue(Verbs.CHECKED, "the host tier runs in checked mode");
            for (QueuePairState s :
                    new QueuePairState[] {QueuePairState.RESET, QueuePairState.INIT, QueuePairState.RTR}) {
                QueuePair qp = qp(rc(), s);
                try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                    wrs.send(1).sge(mr, 0, 8).signaled();
                    refused(
                            "ibv_post_send",
                            Errno.EINVAL,
                            () -> qp.postSend(wrs),
                            "is in " + s,
                            "sends need RTS",
                            "connect it first");
                } finally {
                    qp.close();
                }
            }
            QueuePair reset = qp(rc(), QueuePairState.RESET);
            try (ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 1)) {
                rwrs.add(1).sge(mr, 0, 8);
                refused("ibv_post_recv", Errno.EINVAL, () -> reset.postRecv(rwrs), "RESET", "move it to INIT first");
            } finally {
                reset.close();
            }
            assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
            assertEquals(0, p.calls(StandInProvider.Op.POST_RECV));
        }

        @Test
        void tooManySgesAreRefused() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 3);
                    ReceiveWorkRequests rwrs = new ReceiveWorkRequests(2, 3)) {
                wrs.send(1).sge(mr, 0, 8).sge(mr, 8, 8);
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> qp.postSend(wrs),
                        "has 2 SGEs; the queue pair takes 1",
                        "larger maxSendSge");
                rwrs.add(1).sge(mr, 0, 8).sge(mr, 8, 8).sge(mr, 16, 8);
                refused(
                        "ibv_post_recv",
                        Errno.EINVAL,
                        () -> qp.postRecv(rwrs),
                        "has 3 SGEs; the queue pair takes 1",
                        "larger maxRecvSge");
                // and the chain itself holds no more than it was allocated for
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.sge(mr, 24, 8).sge(mr, 32, 8),
                        "already has its 3 SGEs",
                        "more SGEs per request");
                assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
            } finally {
                qp.close();
            }
        }

        @Test
        void inlineLargerThanMaxInlineDataIsRefused() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            try (Arena a = Arena.ofConfined();
                    SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                MemorySegment data = a.allocate(64);
                wrs.send(1).inline(data).signaled();
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> qp.postSend(wrs),
                        "64 inline bytes; the queue pair takes 16",
                        "larger maxInlineData");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.clear().read(2, 0, 1).inline(data.asSlice(0, 8)),
                        "only SEND and RDMA WRITE can be inline");
                // within the limit it reaches the provider, flagged INLINE, with the bytes copied into the
                // chain when inline() was called: later changes to (or the death of) the source do not matter
                data.asSlice(0, 16).fill((byte) 0x5a);
                wrs.clear().send(3).inline(data.asSlice(0, 16)).signaled();
                data.fill((byte) 0);
                qp.postSend(wrs);
                assertEquals(1, p.wqeCount());
                StandInProvider.Wqe w = p.wqe(0);
                assertEquals(SendWorkRequests.FLAG_INLINE | SendWorkRequests.FLAG_SIGNALED, w.sendFlags());
                assertNotEquals(data.address(), w.addr(), "the provider reads the chain's copy, not the source");
                assertEquals(16, w.totalLength());
                MemorySegment staged = MemorySegment.ofAddress(w.addr()).reinterpret(16);
                for (int i = 0; i < 16; i++) {
                    assertEquals((byte) 0x5a, staged.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i));
                }
            } finally {
                qp.close();
            }
        }

        @Test
        void aUdRequestWithoutDestinationIsRefused() {
            MemorySegment udQp = p.makeQp(p.context(), 0x99, QueuePairType.UD.value());
            QueuePair qp =
                    ForeignHandles.queuePair(pd, udQp, QueuePairInit.of(QueuePairType.UD, cq), QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                assertEquals(0x99, qp.qpNumber());
                wrs.send(1).sge(mr, 0, 8).signaled();
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> qp.postSend(wrs),
                        "has no destination",
                        "call destination(ah, qpn, qkey)");
                wrs.clear().write(2, 0, 1).sge(mr, 0, 8);
                refused("ibv_post_send", Errno.EINVAL, () -> qp.postSend(wrs), "a UD queue pair only sends");
                assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
            } finally {
                qp.close();
            }
        }

        @Test
        void closingAnOwnerInUseIsRefusedAndReleasesNothing() {
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            refused(
                    "ibv_dealloc_pd",
                    Errno.EBUSY,
                    pd::close,
                    "still has 2 open object(s)",
                    "close what was created from it first");
            assertTrue(pd.isOpen());
            refused("ibv_destroy_cq", Errno.EBUSY, cq::close, "still has 1 open object(s)");
            assertTrue(cq.isOpen());
            refused("ibv_close_device", Errno.EBUSY, ctx::close, "open object(s)");
            assertTrue(ctx.isOpen());
            // all of them still work
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                    WorkCompletions wcs = new WorkCompletions(1)) {
                wrs.write(7, 0x1000, 5).sge(mr, 0, 8).signaled();
                qp.postSend(wrs);
                assertEquals(1, cq.poll(wcs, 1, Duration.ofSeconds(5)));
                assertEquals(7, wcs.wrId(0));
            }
            qp.close();
            refused("ibv_dealloc_pd", Errno.EBUSY, pd::close, "still has 1 open object(s)");
            cq.close();
            refused("ibv_destroy_cq", Errno.EBADF, cq::close, "already closed");
            refused(
                    "ibv_poll_cq",
                    Errno.EBADF,
                    () -> {
                        try (WorkCompletions wcs = new WorkCompletions(1)) {
                            cq.poll(wcs);
                        }
                    },
                    "completion queue is closed");
            mr.close();
            pd.close();
            refused("ibv_dealloc_pd", Errno.EBADF, pd::close, "already closed");
            refused("ibv_reg_mr", Errno.EBADF, () -> pd.register(arena.allocate(64)), "protection domain is closed");
            ctx.close();
            refused("ibv_close_device", Errno.EBADF, ctx::close, "already closed");
            refused("ibv_alloc_pd", Errno.EBADF, ctx::allocateProtectionDomain, "device context is closed");
        }

        @Test
        void atomicsNeedAnAlignedAddressAndOneEightByteSge() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 2)) {
                refused("ibv_post_send", Errno.EINVAL, () -> wrs.fetchAndAdd(1, 0x1004, 1, 1), "not 8-byte aligned");
                assertEquals(0, wrs.size(), "the refused request is not in the chain");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.fetchAndAdd(1, 0x1000, 1, 1).sge(mr, 0, 4),
                        "exactly one 8-byte SGE");
                MemoryRegion readOnly =
                        ForeignHandles.memoryRegion(pd, arena.allocate(64), 5, 6, EnumSet.noneOf(Access.class));
                try {
                    refused(
                            "ibv_post_send",
                            Errno.EINVAL,
                            () -> wrs.clear().read(1, 0x1000, 1).sge(readOnly, 0, 8),
                            "lacks LOCAL_WRITE",
                            "Access.LOCAL_WRITE");
                } finally {
                    readOnly.close();
                }
            }
        }

        @Test
        void aFakePdFillIsNeverTouched() {
            // sanity: the stand-in's objects are what the wrappers see
            QueuePair qp = qp(rc(), QueuePairState.RTS);
            assertEquals(StandInProvider.QP_NUM, qp.qpNumber());
            assertEquals(QueuePairState.RTS, qp.state());
            qp.close();
            assertEquals(StandInProvider.CQE, cq.capacity());
            assertEquals(0, mr.segment().get(JAVA_BYTE, 0));
        }
    }
}
