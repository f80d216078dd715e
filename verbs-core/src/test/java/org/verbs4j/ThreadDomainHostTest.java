package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ObjectLayout;

/**
 * Host tier: thread domains and parent domains over the stand-in provider, whose verbs_context
 * implements alloc_td, dealloc_td and alloc_parent_domain (a thread domain in use by a parent
 * domain refuses dealloc_td with EBUSY, as mlx5 does). The successful path reaches the provider
 * with the PD and the TD, and a queue pair created on the parent domain is created on it; the
 * refusals (closing what a parent domain uses, a closed or mismatched argument, the provider's
 * errno) reach nothing and crash nothing.
 */
class ThreadDomainHostTest extends StandInHostTest {
    private ProtectionDomain parent(ThreadDomain td, ProtectionDomain pd) {
        return td.allocateParentDomain(pd, h -> p.deallocParentDomain(h.address()));
    }

    @Test
    void aParentDomainReachesTheProviderWithItsDomainsAndCarriesQueuePairs() {
        ThreadDomain td = o.ctx.allocateThreadDomain();
        assertEquals(1, p.threadDomainsLive());
        ProtectionDomain parent = parent(td, o.pd);
        assertEquals(1, p.parentDomainsLive());
        assertArrayEquals(
                new long[] {o.pd.handle().address(), td.rawHandle("test").address()},
                p.lastParentDomain(),
                "alloc_parent_domain got the PD and the TD");
        assertSame(td, parent.threadDomain());
        assertNull(o.pd.threadDomain());
        assertSame(o.ctx, parent.context());
        QueuePair qp = parent.createExtendedQueuePair(
                QueuePairInit.of(QueuePairType.RC, o.cq).maxSendWr(4).maxRecvWr(4),
                EnumSet.of(SendOperation.SEND),
                h -> p.free(h));
        assertEquals(
                parent.handle().address(),
                qp.handle().reinterpret(ObjectLayout.QP_SIZE).get(ADDRESS, 16).address(),
                "the queue pair was created on the parent domain");
        assertTrue(
                o.pd.gates.containsAll(java.util.List.of(qp.gates())),
                "a region of the PD waits for the posts of the parent domain's queue pairs");
        qp.close();
        parent.close();
        assertEquals(0, p.parentDomainsLive());
        td.close();
        assertEquals(0, p.threadDomainsLive());
    }

    @Test
    void aCompletionQueueOnAParentDomainReachesTheProviderWithIt() {
        ThreadDomain td = o.ctx.allocateThreadDomain();
        ProtectionDomain parent = parent(td, o.pd);
        CompletionQueueEx cq = CompletionQueueEx.create(
                o.ctx,
                8,
                EnumSet.noneOf(CompletionField.class),
                null,
                0,
                parent,
                org.verbs4j.natives.InlineVerbs::createCqEx,
                h -> p.free(h));
        assertEquals(parent.handle().address(), p.lastCreateCqExParent(), "create_cq_ex got the parent domain");
        assertSame(parent, cq.queue().parentDomain());
        refused("ibv_dealloc_pd", Errno.EBUSY, parent::close, "parent domain", "1 open object");
        cq.close();
        parent.close();
        td.close();
        assertEquals(0, p.parentDomainsLive());
    }

    private CompletionQueueEx cqOn(EnumSet<CompletionField> fields, ProtectionDomain parentDomain) {
        return o.ctx.createExtendedCompletionQueue(8, fields, null, 0, parentDomain);
    }

    @Test
    void aCompletionQueueRefusesWhatIsNotAParentDomain() {
        EnumSet<CompletionField> none = EnumSet.noneOf(CompletionField.class);
        refused("ibv_create_cq_ex", Errno.EINVAL, () -> cqOn(none, o.pd), "is not a parent domain");
        ThreadDomain td = o.ctx.allocateThreadDomain();
        ProtectionDomain parent = parent(td, o.pd);
        parent.close();
        refused("ibv_create_cq_ex", Errno.EBADF, () -> cqOn(none, parent), "parent domain is closed");
        td.close();
        assertEquals(0L, p.lastCreateCqExParent(), "create_cq_ex never reached with a parent domain");
    }

    @Test
    void whatAParentDomainUsesRefusesToCloseWhileItIsOpen() {
        ThreadDomain td = o.ctx.allocateThreadDomain();
        ProtectionDomain parent = parent(td, o.pd);
        refused("ibv_dealloc_td", Errno.EBUSY, td::close, "thread domain", "1 open object");
        refused("ibv_dealloc_pd", Errno.EBUSY, o.pd::close, "protection domain");
        assertTrue(td.isOpen() && o.pd.isOpen());
        assertEquals(1, p.threadDomainsLive(), "dealloc_td not reached");
        parent.close();
        refused("ibv_dealloc_pd", Errno.EBADF, parent::close, "parent domain", "already closed");
        td.close();
        refused("ibv_dealloc_td", Errno.EBADF, td::close, "already closed");
        assertEquals(0, p.threadDomainsLive());
    }

    @Test
    void parentDomainArgumentsAreChecked() {
        ThreadDomain td = o.ctx.allocateThreadDomain();
        refused("ibv_alloc_parent_domain", Errno.EINVAL, () -> td.allocateParentDomain(null), "null");
        ProtectionDomain parent = parent(td, o.pd);
        refused("ibv_alloc_parent_domain", Errno.EINVAL, () -> parent(td, parent), "is itself a parent domain");
        parent.close();
        ProtectionDomain other = o.ctx.allocateProtectionDomain(c -> p.makePd(c), h -> {});
        other.close();
        refused("ibv_alloc_parent_domain", Errno.EBADF, () -> parent(td, other), "closed");
        td.close();
        refused("ibv_alloc_parent_domain", Errno.EBADF, () -> parent(td, o.pd), "closed");
        assertEquals(0, p.parentDomainsLive(), "only the one parent domain was ever made");
    }

    @Test
    void theProvidersRefusalNamesWhatIsMissing() {
        p.setDomainErrno(Errno.EOPNOTSUPP);
        refused("ibv_alloc_td", Errno.EOPNOTSUPP, o.ctx::allocateThreadDomain, ThreadDomain.NO_TD, "standin0");
        p.setDomainErrno(Errno.ENOMEM);
        refused("ibv_alloc_td", Errno.ENOMEM, o.ctx::allocateThreadDomain, "refused a thread domain");
        p.setDomainErrno(0);
        ThreadDomain td = o.ctx.allocateThreadDomain();
        p.setDomainErrno(Errno.ENOMEM);
        refused("ibv_alloc_parent_domain", Errno.ENOMEM, () -> parent(td, o.pd), "refused a parent domain");
        p.setDomainErrno(Errno.EOPNOTSUPP);
        refused("ibv_alloc_parent_domain", Errno.EOPNOTSUPP, () -> parent(td, o.pd), "alloc_parent_domain");
        assertTrue(o.pd.isOpen());
        td.close();
        assertEquals(0, p.parentDomainsLive());
    }
}
