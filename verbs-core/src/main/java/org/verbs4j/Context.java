package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_gid_entry;
import org.verbs4j.natives.generated.ibverbs.ibv_port_attr;

/**
 * An open device ({@code struct ibv_context}, from {@code ibv_open_device}): queries, and the
 * factory of protection domains, completion channels and completion queues.
 *
 * <p>Owns the device context and its async event thread ({@link AsyncEventDispatcher}: started
 * when the first completion queue, queue pair or shared receive queue is created, or at the
 * first {@link #nextAsyncEvent}; stopped and joined by {@link #close()} before
 * {@code ibv_close_device}). That thread is the only reader of the context's async fd, which
 * it makes non-blocking: a CQ overrun or a fatal QP/SRQ error reaches the object's next poll or
 * post, and every event is queued for {@link #nextAsyncEvent}. Refuses to close (EBUSY) while
 * anything created from it is open. All methods are thread-safe (they are control-path verbs),
 * as libibverbs' are.
 */
public final class Context extends NativeResource {
    private final String deviceName;
    /** The provider (libibverbs driver) name, e.g. {@code rxe}, or null when unknown. */
    private final String providerName;
    /**
     * Whether its queue pairs, SRQs and CQs post and poll through critical downcalls (a provider
     * whose post and poll stay in user space), or ordinary ones (see InlineVerbs.criticalDataPath).
     */
    final boolean criticalDataPath;
    /** Reads, routes and queues the async events; stopped before the device is closed. */
    final AsyncEventDispatcher asyncEvents;

    Context(MemorySegment ctx, String deviceName) {
        this(ctx, deviceName, LibIbverbs::closeDevice);
    }

    Context(MemorySegment ctx, String deviceName, Destroyer destroy) {
        this(
                ctx,
                deviceName,
                destroy,
                InlineVerbs.criticalDataPath(InlineVerbs.providerName(ctx.reinterpret(ContextLayout.SIZE))));
    }

    /** With the data path's linkage chosen by the caller (tests: a stand-in op that calls back into Java). */
    Context(MemorySegment ctx, String deviceName, Destroyer destroy, boolean criticalDataPath) {
        this(
                ctx.reinterpret(ContextLayout.SIZE),
                deviceName,
                destroy,
                new AsyncEventDispatcher(ctx.reinterpret(ContextLayout.SIZE), deviceName),
                criticalDataPath);
    }

    private Context(
            MemorySegment ctx,
            String deviceName,
            Destroyer destroy,
            AsyncEventDispatcher events,
            boolean criticalDataPath) {
        super(null, "device context", "ibv_close_device", ctx, stopThenDestroy(events, destroy), null);
        this.deviceName = deviceName;
        this.providerName = InlineVerbs.providerName(ctx);
        this.criticalDataPath = criticalDataPath;
        this.asyncEvents = events;
    }

    /** The release (explicit or by the leak cleaner): stop the event thread, then close the device. */
    private static Destroyer stopThenDestroy(AsyncEventDispatcher events, Destroyer destroy) {
        return h -> {
            events.stop();
            try {
                destroy.destroy(h);
            } catch (RuntimeException e) {
                events.reopen();
                throw e;
            }
        };
    }

    /** The device name, e.g. {@code rxe0}. */
    public String deviceName() {
        return deviceName;
    }

    /**
     * The libibverbs provider (driver) of the device, e.g. {@code rxe}, {@code siw} or
     * {@code mlx5}; empty for a context libibverbs did not make. It decides how the data path is
     * linked: critical downcalls where the provider's post and poll stay in user space, ordinary
     * ones where its post is a system call (rxe, siw).
     */
    public Optional<String> providerName() {
        return Optional.ofNullable(providerName);
    }

    /** The raw {@code struct ibv_context *}, for code that calls libibverbs directly. */
    public MemorySegment handle() {
        return rawHandle("Context.handle");
    }

    /** The number of completion vectors (the valid range of a CQ's {@code comp_vector}). */
    public int numCompVectors() {
        pin("ibv_context");
        try {
            return handle.get(JAVA_INT, ContextLayout.NUM_COMP_VECTORS);
        } finally {
            unpin();
        }
    }

    /** {@code ibv_query_device}. */
    public DeviceAttributes queryDevice() {
        pin("ibv_query_device");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(ibv_device_attr.layout());
            LibIbverbs.queryDevice(handle, attr);
            return DeviceAttributes.read(attr);
        } finally {
            unpin();
        }
    }

    /** {@code ibv_query_port} (the full attribute set, through the provider's extended op). */
    public PortAttributes queryPort(int port) {
        checkPort("ibv_query_port", port);
        pin("ibv_query_port");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(ibv_port_attr.layout());
            try {
                InlineVerbs.queryPort(handle, port, attr);
            } catch (VerbsException e) {
                throw e.errno() == Errno.EINVAL ? noSuchPort("ibv_query_port", port) : e;
            }
            return PortAttributes.read(attr);
        } finally {
            unpin();
        }
    }

    /** Ports are numbered from 1 (a {@code uint8_t}): refused before the call. */
    private void checkPort(String verb, int port) {
        if (port < 1 || port > 255) {
            throw noSuchPort(verb, port);
        }
    }

    /** The EINVAL of a port query, with the ports the device has (when it can say). */
    private VerbsException noSuchPort(String verb, int port) {
        String ports;
        try {
            int n = queryDevice().physPortCount();
            ports = n == 1 ? "it has port 1 only" : "its ports are 1.." + n;
        } catch (VerbsException e) {
            ports = "ports are numbered from 1";
        }
        return new InvalidRequestException(
                verb,
                "port " + port + " does not exist on " + deviceName + " (" + ports + ")",
                "pass a port number the device has (queryDevice().physPortCount())");
    }

    /** {@code ibv_query_gid}. */
    public Gid queryGid(int port, int index) {
        checkPort("ibv_query_gid", port);
        pin("ibv_query_gid");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment gid = arena.allocate(Gid.BYTES);
            try {
                LibIbverbs.queryGid(handle, port, index, gid);
            } catch (VerbsException e) {
                if (e.errno() != Errno.EINVAL) {
                    throw e;
                }
                int len;
                try {
                    len = queryPort(port).gidTableLength();
                } catch (VerbsException noPort) {
                    throw noSuchPort("ibv_query_gid", port);
                }
                throw new InvalidRequestException(
                        "ibv_query_gid",
                        "GID index " + index + " is not in port " + port + "'s table of " + deviceName
                                + (index < 0 || index >= len ? " (indexes 0.." + (len - 1) + ")" : " (an empty entry)"),
                        "pass an index below queryPort(port).gidTableLength(), or list the entries with gidTable(port)");
            }
            return Gid.read(gid, 0);
        } finally {
            unpin();
        }
    }

    /** The populated entries of a port's GID table, with their types ({@code ibv_query_gid_ex}). */
    public List<GidEntry> gidTable(int port) {
        checkPort("ibv_query_gid_ex", port);
        int len = queryPort(port).gidTableLength();
        List<GidEntry> out = new ArrayList<>();
        pin("ibv_query_gid_ex");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment e = arena.allocate(ibv_gid_entry.layout());
            for (int i = 0; i < len; i++) {
                try {
                    LibIbverbs.queryGidEx(handle, port, i, e);
                } catch (VerbsException ex) {
                    if (ex.errno() == Errno.ENODATA || ex.errno() == Errno.EINVAL) {
                        continue; // an empty slot
                    }
                    throw ex;
                }
                Gid gid = Gid.read(e, ibv_gid_entry.gid$offset());
                if (!gid.isZero()) {
                    out.add(new GidEntry(
                            ibv_gid_entry.gid_index(e),
                            ibv_gid_entry.port_num(e),
                            gid,
                            GidType.of(ibv_gid_entry.gid_type(e)),
                            ibv_gid_entry.ndev_ifindex(e)));
                }
            }
        } finally {
            unpin();
        }
        return out;
    }

    /**
     * The RoCE v2 GID entry of {@code address} on {@code port} (for IPv4, {@code ::ffff:a.b.c.d}):
     * the GID index a RoCE v2 queue pair must use to reach that address.
     */
    public GidEntry roceV2Gid(int port, InetAddress address) {
        Gid wanted = Gid.ofAddress(address);
        List<GidEntry> table = gidTable(port);
        for (GidEntry e : table) {
            if (e.type() == GidType.ROCE_V2 && e.gid().equals(wanted)) {
                return e;
            }
        }
        throw VerbsException.create(
                "ibv_query_gid_ex",
                Errno.ENOENT,
                "port " + port + " of " + deviceName + " has no RoCE v2 GID for " + address.getHostAddress()
                        + " (table: " + table + ")",
                "give the RDMA net device that address (ip addr add), or pick the address the GID table shows");
    }

    /** The first RoCE v2 GID entry of {@code port} with an IPv4-mapped address, if any. */
    public Optional<GidEntry> firstRoceV2Ipv4Gid(int port) {
        for (GidEntry e : gidTable(port)) {
            byte[] g = e.gid().toBytes();
            if (e.type() == GidType.ROCE_V2 && g[10] == (byte) 0xff && g[11] == (byte) 0xff && g[0] == 0) {
                return Optional.of(e);
            }
        }
        return Optional.empty();
    }

    /** {@code ibv_alloc_pd}. */
    public ProtectionDomain allocateProtectionDomain() {
        return allocateProtectionDomain(LibIbverbs::allocPd, LibIbverbs::deallocPd);
    }

    /**
     * {@code ibv_alloc_td}: a {@link ThreadDomain}, for parent domains whose queues one thread
     * uses at a time; EOPNOTSUPP, naming what is missing, where the provider has none.
     */
    public ThreadDomain allocateThreadDomain() {
        return ThreadDomain.allocate(this);
    }

    /**
     * {@code ibv_alloc_dm}: {@code length} bytes of {@link DeviceMemory} on the adapter; EOPNOTSUPP,
     * naming the device attribute, where it has none.
     */
    public DeviceMemory allocateDeviceMemory(long length) {
        return DeviceMemory.allocate(this, length);
    }

    /**
     * {@code ibv_open_xrcd} of an anonymous {@link XrcDomain} (fd -1, {@code O_CREAT}); refused,
     * naming what is missing, where the device has no XRC.
     */
    public XrcDomain openXrcDomain() {
        return XrcDomain.open(this, null, org.verbs4j.natives.XrcVerbs::closeXrcd);
    }

    /**
     * {@code ibv_open_xrcd} of the {@link XrcDomain} that {@code file} names (created if missing):
     * every process that opens the same file on the same device gets the same domain.
     */
    public XrcDomain openXrcDomain(java.nio.file.Path file) {
        if (file == null) {
            throw new InvalidRequestException(
                    "ibv_open_xrcd",
                    "the file is null",
                    "pass the file that names the shared domain, or call openXrcDomain() for an anonymous one");
        }
        return XrcDomain.open(this, file, org.verbs4j.natives.XrcVerbs::closeXrcd);
    }

    /** Makes a native object from its parent's handle (the verb; a test's stand-in). */
    @FunctionalInterface
    interface Creator {
        MemorySegment create(MemorySegment parent);
    }

    /**
     * A protection domain made by {@code alloc} and released by {@code dealloc}. The context is
     * pinned meanwhile: a close on another thread is refused (EBUSY) until the PD exists, and
     * then while it is open; a close that came first makes this throw EBADF.
     */
    ProtectionDomain allocateProtectionDomain(Creator alloc, Destroyer dealloc) {
        pin("ibv_alloc_pd");
        try {
            return new ProtectionDomain(this, alloc.create(handle), dealloc);
        } finally {
            unpin();
        }
    }

    /** {@code ibv_create_comp_channel}. */
    public CompletionChannel createCompletionChannel() {
        pin("ibv_create_comp_channel");
        try {
            MemorySegment ch = LibIbverbs.createCompChannel(handle);
            try {
                return new CompletionChannel(this, ch);
            } catch (RuntimeException e) {
                LibIbverbs.destroyCompChannel(ch); // making its fd non-blocking or its wake-up eventfd failed
                throw e;
            }
        } finally {
            unpin();
        }
    }

    /** {@code ibv_create_cq} with at least {@code minEntries} entries, no channel, vector 0. */
    public CompletionQueue createCompletionQueue(int minEntries) {
        return createCompletionQueue(minEntries, null, 0);
    }

    /**
     * {@code ibv_create_cq}.
     *
     * @param minEntries   the least number of entries (the provider may round up)
     * @param channel      the completion channel that receives its events, or null
     * @param compVector   the completion vector, {@code 0 <= compVector < numCompVectors()}
     */
    public CompletionQueue createCompletionQueue(int minEntries, CompletionChannel channel, int compVector) {
        return createCq(minEntries, channel, compVector, null);
    }

    /**
     * {@code ibv_create_cq} of a completion queue <em>confined</em> to the calling thread, as a
     * confined {@link java.lang.foreign.Arena} is: only this thread may poll it, arm it and close
     * it (another thread may close it once this one has ended), so its polls skip the gate that
     * lets any thread poll a shared CQ (one compare-and-set per poll). For a CQ that one thread
     * creates and polls, as in a latency loop or a per-thread transport; see
     * {@link CompletionQueue}.
     *
     * @param minEntries the least number of entries (the provider may round up)
     */
    public CompletionQueue createConfinedCompletionQueue(int minEntries) {
        return createConfinedCompletionQueue(minEntries, null, 0);
    }

    /**
     * {@link #createConfinedCompletionQueue(int)} with a completion channel.
     *
     * @param minEntries   the least number of entries (the provider may round up)
     * @param channel      the completion channel that receives its events, or null
     * @param compVector   the completion vector, {@code 0 <= compVector < numCompVectors()}
     */
    public CompletionQueue createConfinedCompletionQueue(int minEntries, CompletionChannel channel, int compVector) {
        return createCq(minEntries, channel, compVector, Thread.currentThread());
    }

    /**
     * The capability report: for the device and each port, every optional feature (atomics, SRQ,
     * inline data, extended CQs and QPs, completion timestamps, ODP, memory windows, XRC, device
     * memory, multicast, thread domains, dma-buf) with yes or no and, for no, the reason (see
     * {@link CapabilityReport}). Probes create and close a protection domain, a CQ and QPs.
     */
    public CapabilityReport capabilities() {
        ensureOpen("ibv_query_device_ex");
        return Capabilities.of(this);
    }

    /**
     * {@code ibv_create_cq_ex}: an extended completion queue whose completions deliver
     * {@code fields} (see {@link CompletionQueueEx}); refused with the reason where the device
     * lacks them (timestamps on a device with {@code completion_timestamp_mask} 0, flags the
     * provider rejects).
     *
     * @param minEntries the least number of entries (the provider may round up)
     * @param fields     the optional fields each completion delivers (may be empty)
     * @param channel    the completion channel that receives its events, or null
     * @param compVector the completion vector, {@code 0 <= compVector < numCompVectors()}
     */
    public CompletionQueueEx createExtendedCompletionQueue(
            int minEntries, java.util.Set<CompletionField> fields, CompletionChannel channel, int compVector) {
        return CompletionQueueEx.create(
                this, minEntries, fields, channel, compVector, InlineVerbs::createCqEx, LibIbverbs::destroyCq);
    }

    /**
     * {@link #createExtendedCompletionQueue(int, java.util.Set, CompletionChannel, int)} on a parent
     * domain ({@code IBV_CQ_INIT_ATTR_MASK_PD}): the queue belongs to the parent domain's thread
     * domain (mlx5 then drops its lock). The parent domain refuses to close while the queue is
     * open; a plain protection domain is refused.
     *
     * @param parentDomain a parent domain of this context ({@link ThreadDomain#allocateParentDomain})
     */
    public CompletionQueueEx createExtendedCompletionQueue(
            int minEntries,
            java.util.Set<CompletionField> fields,
            CompletionChannel channel,
            int compVector,
            ProtectionDomain parentDomain) {
        return CompletionQueueEx.create(
                this,
                minEntries,
                fields,
                channel,
                compVector,
                parentDomain,
                InlineVerbs::createCqEx,
                LibIbverbs::destroyCq);
    }

    private CompletionQueue createCq(int minEntries, CompletionChannel channel, int compVector, Thread confinedTo) {
        return createCq(minEntries, channel, compVector, confinedTo, LibIbverbs::createCq, LibIbverbs::destroyCq);
    }

    /** Makes a {@code struct ibv_cq} (ibv_create_cq; a test's stand-in). */
    @FunctionalInterface
    interface CqCreator {
        MemorySegment create(MemorySegment context, int cqe, MemorySegment channel, int compVector);
    }

    /**
     * A completion queue made by {@code create} and released by {@code destroy}; the context and
     * the channel are pinned meanwhile (see {@link #allocateProtectionDomain(Creator, Destroyer)}).
     */
    CompletionQueue createCq(
            int minEntries,
            CompletionChannel channel,
            int compVector,
            Thread confinedTo,
            CqCreator create,
            Destroyer destroy) {
        return createCq(minEntries, channel, compVector, confinedTo, null, create, destroy);
    }

    /** As above, on {@code parentDomain} (null: none), which is pinned meanwhile and used by the CQ. */
    CompletionQueue createCq(
            int minEntries,
            CompletionChannel channel,
            int compVector,
            Thread confinedTo,
            ProtectionDomain parentDomain,
            CqCreator create,
            Destroyer destroy) {
        ensureOpen("ibv_create_cq");
        if (minEntries <= 0) {
            throw VerbsException.create(
                    "ibv_create_cq",
                    Errno.EINVAL,
                    "minEntries " + minEntries + " is not positive",
                    "ask for at least 1 entry (the provider rounds up), at most queryDevice().maxCqe()");
        }
        pinAll("ibv_create_cq", this, channel, parentDomain);
        try {
            MemorySegment cq = create.create(
                    handle, minEntries, channel == null ? MemorySegment.NULL : channel.handle, compVector);
            return new CompletionQueue(this, cq, channel, destroy, confinedTo, parentDomain);
        } finally {
            unpinAll(this, channel, parentDomain);
        }
    }

    /**
     * Waits up to {@code timeout} for the next asynchronous event and returns it (already
     * acknowledged), or empty on timeout. The context's event thread reads the events; this
     * takes them from its bounded queue ({@value AsyncEventDispatcher#QUEUE_CAPACITY} events;
     * older unread ones are dropped and logged at DEBUG). Any number of threads may wait: each
     * returns by its deadline. A {@link #close()} meanwhile makes the waiters throw EBADF.
     * Blocks the calling thread (a virtual one unmounts). Interruptible: an interrupt ends the
     * wait at once with empty and the interrupt status kept. Any {@code timeout} is accepted: a
     * negative one counts as zero, a huge one saturates.
     */
    public Optional<AsyncEvent> nextAsyncEvent(Duration timeout) {
        ensureOpen("ibv_get_async_event");
        return asyncEvents.next(timeout, () -> closedException("ibv_get_async_event"));
    }

    /**
     * The {@code IBV_EVENT_DEVICE_FATAL} event, if the device reported one: every object of
     * this context is then unusable (their polls and posts throw).
     */
    public Optional<AsyncEvent> deviceFailure() {
        return Optional.ofNullable(asyncEvents.deviceFailure());
    }

    @Override
    String describe() {
        return "Context " + deviceName;
    }
}
