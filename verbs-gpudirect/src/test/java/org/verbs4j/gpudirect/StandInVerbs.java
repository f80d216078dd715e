package org.verbs4j.gpudirect;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.StandInProvider;

/**
 * A verbs context, PD and CQ over the stand-in provider, and {@link GpuRegistrar.Verbs} that
 * registers through the stand-in's fake {@code reg_dmabuf_mr} and device-pointer MRs (the real
 * ones need a device: the guest tier runs them). Closed by the test.
 */
final class StandInVerbs implements AutoCloseable {
    final StandInProvider p = StandInProvider.open();
    final Context ctx = ForeignHandles.context(p.context(), "standin0");
    final ProtectionDomain pd = ForeignHandles.protectionDomain(ctx, p.pd());
    final CompletionQueue cq = ForeignHandles.completionQueue(ctx, p.cq());

    final GpuRegistrar.Verbs verbs = new GpuRegistrar.Verbs() {
        @Override
        public MemoryRegion dmaBuf(
                ProtectionDomain d, int fd, long offset, long length, long iova, Set<Access> access) {
            return wrap(
                    "ibv_reg_dmabuf_mr",
                    p.regDmabufMr(d.handle().address(), offset, length, iova, fd, Access.mask(access)),
                    iova,
                    length,
                    access);
        }

        @Override
        public MemoryRegion deviceMemory(ProtectionDomain d, long address, long length, Set<Access> access) {
            return wrap(
                    "ibv_reg_mr",
                    p.regDeviceMr(d.handle().address(), address, length, Access.mask(access)),
                    address,
                    length,
                    access);
        }
    };

    private MemoryRegion wrap(String verb, long mr, long address, long length, Set<Access> access) {
        if (mr == 0) {
            throw VerbsException.create(verb, p.lastDeviceRegErrno(), "the stand-in provider refused", null);
        }
        MemorySegment m = MemorySegment.ofAddress(mr).reinterpret(ObjectLayout.MR_SIZE);
        return ForeignHandles.deviceMemoryRegion(
                pd,
                address,
                length,
                m.get(ValueLayout.JAVA_INT, ObjectLayout.MR_LKEY),
                m.get(ValueLayout.JAVA_INT, ObjectLayout.MR_RKEY),
                access,
                () -> p.deregDeviceMr(mr));
    }

    GpuRegistrar registrar(GpuRegistrar.Mode mode, FakeSysfs sys) {
        return new GpuRegistrar(mode, sys.root, verbs);
    }

    @Override
    public void close() {
        p.setDeviceRegErrno(0, 0);
        cq.close();
        pd.close();
        ctx.close();
        p.close();
    }
}
