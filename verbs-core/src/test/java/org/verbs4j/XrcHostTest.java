package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.XrcVerbs;

/**
 * Host tier: XRC over the stand-in provider, whose verbs_context implements open_xrcd,
 * close_xrcd, create_srq_ex (IBV_SRQT_XRC) and get_srq_num, and whose create_qp_ex makes XRC_SEND
 * and XRC_RECV queue pairs (a domain in use refuses close_xrcd with EBUSY, as the kernel does).
 * The successful path reaches the provider with the domain, PD and CQ; a post on the XRC_SEND
 * queue pair carries the remote SRQ number; a receive of the XRC SRQ completes on its CQ and is
 * credited to it. The refusals (closing what an SRQ or QP uses, closed or mismatched arguments, a
 * request without an SRQ number, the provider's errno) reach nothing and crash nothing.
 */
class XrcHostTest extends StandInHostTest {
    private XrcDomain domain() {
        return XrcDomain.open(o.ctx, null, XrcVerbs::closeXrcd);
    }

    private SharedReceiveQueue srq(XrcDomain xrcd, CompletionQueue cq) {
        return o.pd.createXrcSharedReceiveQueue(xrcd, cq, 16, 1, h -> p.destroyXrcSrq(h.address()));
    }

    private QueuePair sender() {
        MemorySegment ctx = o.ctx.handle;
        QueuePair qp = o.pd.createQueuePair(
                QueuePairInit.of(QueuePairType.XRC_SEND, o.cq).maxSendWr(8),
                (pd, attr) -> org.verbs4j.natives.ExtendedPostVerbs.createQpEx(ctx, attr),
                h -> p.destroyQpEx(h.address()));
        qp.assumeState(QueuePairState.RTS);
        return qp;
    }

    @Test
    void aSendNamesTheRemoteSrqAndTheSrqsReceiveIsCreditedToIt() {
        XrcDomain xrcd = domain();
        assertArrayEquals(
                new int[] {XrcVerbs.XRCD_INIT_ATTR_FD | XrcVerbs.XRCD_INIT_ATTR_OFLAGS, -1, 0100},
                p.lastOpenXrcd(),
                "an anonymous domain: fd -1 with O_CREAT");
        assertEquals(1, p.xrcDomainsLive());
        SharedReceiveQueue srq = srq(xrcd, o.cq);
        assertArrayEquals(
                new long[] {o.pd.handle().address(), xrcd.handle().address(), o.cq.handle.address(), 16},
                p.lastXrcSrq(),
                "create_srq_ex got the PD, the domain, the CQ and the depth");
        assertEquals(0x700, srq.srqNumber(), "ibv_get_srq_num");
        assertSame(xrcd, srq.xrcDomain());
        assertSame(o.cq, srq.completionQueue());
        XrcReceiveQueuePair recv = xrcd.createReceiveQueuePair(h -> p.destroyQpEx(h.address()));
        assertArrayEquals(
                new long[] {XrcVerbs.QPT_XRC_RECV, xrcd.handle().address(), 0},
                p.lastCreateQpEx(),
                "XRC_RECV: the domain, no CQs");
        assertEquals(0x5151, recv.qpNumber());
        QueuePair send = sender();
        assertArrayEquals(new long[] {XrcVerbs.QPT_XRC_SEND, 0, 0}, p.lastCreateQpEx(), "XRC_SEND: no receive CQ");
        assertEquals(0, send.maxRecvWr());

        try (SendWorkRequests wrs = new SendWorkRequests(2, 1);
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            long before = p.wqeCount();
            wrs.send(7).sge(o.mr, 0, 64).remoteSrqNumber(srq.srqNumber()).signaled();
            wrs.send(8).sge(o.mr, 64, 64).remoteSrqNumber(0x123);
            send.postSend(wrs);
            assertEquals(before + 2, p.wqeCount());
            assertEquals(0x700, p.wqeOperand(before), "wr.qp_type.xrc.remote_srqn of request #0");
            assertEquals(0x123, p.wqeOperand(before + 1), "wr.qp_type.xrc.remote_srqn of request #1");

            rwrs.add(99).sge(o.mr, 1024, 256);
            srq.postRecv(rwrs);
            assertEquals(Verbs.CHECKED ? 1 : 0, srq.outstanding());
            assertEquals(99, p.deliverRecv(200, false, 0));
            assertEquals(2, o.cq.poll(wcs, 2, Duration.ofSeconds(5)));
            assertEquals(7, wcs.wrId(0));
            assertEquals(99, wcs.wrId(1));
            assertEquals(200, wcs.byteLength(1));
            assertEquals(0, srq.outstanding(), "the receive, from a QP without an account, credited to the XRC SRQ");
        }
        send.close();
        recv.close();
        srq.close();
        assertEquals(0, p.xrcSrqsLive());
        xrcd.close();
        assertEquals(0, p.xrcDomainsLive());
    }

    @Test
    void aReceiveQueuePairIsOpenedByItsNumberAndHoldsTheDomain() {
        XrcDomain xrcd = domain();
        XrcReceiveQueuePair recv = xrcd.createReceiveQueuePair(h -> p.destroyQpEx(h.address()));
        XrcReceiveQueuePair opened = xrcd.openReceiveQueuePair(recv.qpNumber(), h -> p.destroyQpEx(h.address()));
        assertArrayEquals(
                new long[] {
                    XrcVerbs.QP_OPEN_ATTR_NUM | XrcVerbs.QP_OPEN_ATTR_XRCD | XrcVerbs.QP_OPEN_ATTR_TYPE,
                    recv.qpNumber(),
                    xrcd.handle().address()
                },
                p.lastOpenQp(),
                "open_qp got the number, the domain and the type");
        assertEquals(recv.qpNumber(), opened.qpNumber());
        assertSame(xrcd, opened.domain());
        recv.close();
        refused("ibv_close_xrcd", Errno.EBUSY, xrcd::close, "XRC domain", "1 open object");
        refused(
                "ibv_open_qp",
                Errno.EINVAL,
                () -> xrcd.openReceiveQueuePair(0x999, h -> p.destroyQpEx(h.address())),
                "XRC_RECV queue pair 2457",
                "qpNumber()");
        opened.close();
        xrcd.close();
        assertEquals(0, p.xrcDomainsLive());
        refused("ibv_open_qp", Errno.EBADF, () -> xrcd.openReceiveQueuePair(recv.qpNumber()), "XRC domain is closed");
    }

    @Test
    void whatAnXrcSrqOrQueuePairUsesRefusesToCloseWhileItIsOpen() {
        XrcDomain xrcd = domain();
        SharedReceiveQueue srq = srq(xrcd, o.cq);
        XrcReceiveQueuePair recv = xrcd.createReceiveQueuePair(h -> p.destroyQpEx(h.address()));
        refused("ibv_close_xrcd", Errno.EBUSY, xrcd::close, "XRC domain", "2 open object");
        refused("ibv_destroy_cq", Errno.EBUSY, o.cq::close, "completion queue");
        refused("ibv_dealloc_pd", Errno.EBUSY, o.pd::close, "protection domain");
        assertEquals(1, p.xrcDomainsLive(), "close_xrcd not reached");
        srq.close();
        refused("ibv_destroy_srq", Errno.EBADF, srq::close, "already closed");
        refused("ibv_close_xrcd", Errno.EBUSY, xrcd::close, "1 open object");
        recv.close();
        refused("ibv_destroy_qp", Errno.EBADF, recv::close, "already closed");
        xrcd.close();
        refused("ibv_close_xrcd", Errno.EBADF, xrcd::close, "already closed");
        assertEquals(0, p.xrcDomainsLive());
    }

    @Test
    void xrcArgumentsAreChecked() {
        XrcDomain xrcd = domain();
        refused("ibv_open_xrcd", Errno.EINVAL, () -> o.ctx.openXrcDomain(null), "the file is null");
        refused("ibv_create_srq_ex", Errno.EINVAL, () -> srq(null, o.cq), "XRC domain is null");
        refused("ibv_create_srq_ex", Errno.EINVAL, () -> srq(xrcd, null), "completion queue is null");
        refused(
                "ibv_create_srq_ex",
                Errno.EINVAL,
                () -> o.pd.createXrcSharedReceiveQueue(xrcd, o.cq, 0, 1, h -> {}),
                "must be positive");
        SharedReceiveQueue srq = srq(xrcd, o.cq);
        refused("ibv_create_srq_ex", Errno.EINVAL, () -> srq(xrcd, o.cq), "already serves an XRC SRQ");
        assertEquals(1, p.xrcSrqsLive(), "the second SRQ never reached the provider");
        refused(
                "ibv_create_qp",
                Errno.EINVAL,
                () -> o.pd.createQueuePair(QueuePairInit.of(QueuePairType.XRC_RECV, o.cq)),
                "XrcDomain.createReceiveQueuePair");
        refused(
                "ibv_create_qp_ex",
                Errno.EINVAL,
                () -> o.pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.XRC_SEND, o.cq).sharedReceiveQueue(srq)),
                "takes no shared receive queue");
        srq.close();
        xrcd.close();
        refused("ibv_create_qp_ex", Errno.EBADF, () -> xrcd.createReceiveQueuePair(h -> {}), "XRC domain is closed");
        refused("ibv_create_srq_ex", Errno.EBADF, () -> srq(xrcd, o.cq), "XRC domain is closed");
        assertEquals(0, p.xrcSrqsLive());
    }

    @Test
    void aDomainOfAnotherContextIsRefused() {
        Context other = ForeignHandles.context(p.makeContext(true), "standin1");
        try {
            XrcDomain foreign = XrcDomain.open(other, null, XrcVerbs::closeXrcd);
            String both = "the XRC domain is of standin1, the protection domain of standin0";
            refused("ibv_create_srq_ex", Errno.EINVAL, () -> srq(foreign, o.cq), both);
            assertEquals(0, p.xrcSrqsLive());
            foreign.close();
        } finally {
            other.close();
        }
    }

    @Test
    void theExtendedPostNamesEachRequestsRemoteSrqThroughWrSetXrcSrqn() {
        QueuePair send = o.pd.createExtendedQueuePair(
                QueuePairInit.of(QueuePairType.XRC_SEND, o.cq).maxSendWr(8),
                EnumSet.of(SendOperation.SEND, SendOperation.RDMA_WRITE),
                h -> p.destroyQpEx(h.address()));
        send.assumeState(QueuePairState.RTS);
        try (SendWorkRequests wrs = new SendWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            long before = p.wqeCount();
            long extended = p.wrExtendedWqes();
            wrs.send(7).sge(o.mr, 0, 64).remoteSrqNumber(0x700).signaled();
            wrs.write(8, o.mr.address() + 512, StandInObjects.RKEY)
                    .sge(o.mr, 64, 64)
                    .remoteSrqNumber(0x123);
            send.postSendExtended(wrs);
            assertEquals(before + 2, p.wqeCount());
            assertEquals(extended + 2, p.wrExtendedWqes(), "both built by the ibv_wr_* builders");
            assertEquals(0x700, p.wqeOperand(before), "wr_set_xrc_srqn of request #0");
            assertEquals(0x123, p.wqeOperand(before + 1), "wr_set_xrc_srqn of request #1");
            assertEquals(1, o.cq.poll(wcs, 1, Duration.ofSeconds(5)));
            assertEquals(7, wcs.wrId(0));
            wrs.clear();
            wrs.send(9).sge(o.mr, 0, 8);
            refused("ibv_post_send", Errno.EINVAL, () -> send.postSendExtended(wrs), "names no remote XRC SRQ");
            assertEquals(before + 2, p.wqeCount(), "nothing reached the provider");
        }
        send.close();
    }

    @Test
    void anXrcSendRequestWithoutAnSrqNumberIsRefused() {
        QueuePair send = sender();
        try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
            wrs.send(1).sge(o.mr, 0, 8).remoteSrqNumber(0x700);
            wrs.send(2).sge(o.mr, 8, 8);
            long before = p.wqeCount();
            refused("ibv_post_send", Errno.EINVAL, () -> send.postSend(wrs), "request #1", "names no remote XRC SRQ");
            assertEquals(before, p.wqeCount(), "nothing reached post_send");
            wrs.clear();
            wrs.send(3).sge(o.mr, 0, 8);
            refused("ibv_post_send", Errno.EINVAL, () -> send.postSend(wrs), "request #0");
            refused("ibv_wr_start", Errno.EINVAL, () -> send.postSendExtended(wrs), "without the extended API");
            assertEquals(before, p.wqeCount());
        }
        send.close();
    }

    @Test
    void aBulkAppendAfterANumberedRequestTakesItsOwnSrqNumber() {
        QueuePair send = sender();
        try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
            wrs.send(1).sge(o.mr, 0, 8).remoteSrqNumber(0x700);
            send.postSend(wrs);
            wrs.clear();
            // slot 0 again, through the bulk append: numbered anew, it is posted with its own number
            wrs.writes(1, 2, 0x10000, 0, 0x99, o.mr, 0, 0, 8).remoteSrqNumber(0x701);
            long before = p.wqeCount();
            send.postSend(wrs);
            assertEquals(before + 1, p.wqeCount());
            assertEquals(0x701, p.wqeOperand(before), "wr.qp_type.xrc.remote_srqn of the bulk-appended request");
            // one left unnumbered is refused by its index
            wrs.clear();
            wrs.send(3).sge(o.mr, 0, 8).remoteSrqNumber(0x700);
            wrs.send(4).sge(o.mr, 8, 8).remoteSrqNumber(0x700);
            send.postSend(wrs);
            wrs.clear();
            wrs.writes(2, 5, 0x10000, 8, 0x99, o.mr, 0, 8, 8).remoteSrqNumber(0x701);
            refused("ibv_post_send", Errno.EINVAL, () -> send.postSend(wrs), "request #0", "names no remote XRC SRQ");
        }
        send.close();
    }

    @Test
    void theProvidersRefusalNamesWhatIsMissing() {
        p.setXrcErrno(Errno.EOPNOTSUPP);
        refused("ibv_open_xrcd", Errno.EOPNOTSUPP, o.ctx::openXrcDomain, "standin0 offers no XRC", XrcDomain.NO_XRC);
        p.setXrcErrno(Errno.ENOMEM);
        refused("ibv_open_xrcd", Errno.ENOMEM, o.ctx::openXrcDomain, "refused an XRC domain");
        p.setXrcErrno(0);
        XrcDomain xrcd = domain();
        p.setXrcErrno(Errno.ENOMEM);
        refused("ibv_create_srq_ex", Errno.ENOMEM, () -> srq(xrcd, o.cq), "refused an XRC SRQ of 16 WRs x 1 SGE");
        p.setXrcErrno(Errno.EOPNOTSUPP);
        refused("ibv_create_srq_ex", Errno.EOPNOTSUPP, () -> srq(xrcd, o.cq), "offers no XRC SRQs");
        p.setXrcErrno(0);
        SharedReceiveQueue srq = srq(xrcd, o.cq); // the refused creation released its claim on the CQ
        assertTrue(srq.isOpen());
        srq.close();
        xrcd.close();
        assertEquals(0, p.xrcDomainsLive());
    }
}
