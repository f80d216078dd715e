package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.AddressHandle;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.Context;
import org.verbs4j.DeviceAttributes;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairState;
import org.verbs4j.QueuePairType;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.LibRdmacm;

/**
 * A connection made through librdmacm: one cm id, and the RC {@link QueuePair} on it (or a UD one,
 * {@link #connectUd}: RDMA_PS_UDP, the peer's QPN, Q_Key and an {@link #addressHandle()})
 * (created with {@code ibv_create_qp}, UD with {@code rdma_create_qp}: an ordinary queue pair, same data path, checked mode and
 * close rules), its completion queues and protection domain. Made by {@link #connect} (active
 * side) or {@link ConnectionRequest#accept} (passive side).
 *
 * <p>The queue pair's transitions are this library's, with librdmacm's path attributes
 * ({@code rdma_init_qp_attr}) and this library's fail-safe choices laid over them: the access the
 * setup grants (none by default), retry count at most 6, bounded RNR retry, the ACK timeout of the
 * {@link ConnectOptions}. librdmacm never touches the queue pair itself (the id carries no QP
 * pointer), so destroying the id and the queue pair in any order is safe.
 *
 * <p>Owns the cm id, the queue pair, and the completion queues it created (not a protection
 * domain or queues the setup passed, nor the library's per-device PD). {@link #close()} works in
 * every state, from any thread, more than once: it disconnects if connected, destroys the id,
 * then closes the queue pair and its queues; a connect or accept waiting on another thread
 * throws {@link ResourceClosedException}. State changes are visible through {@link #state()},
 * {@link #awaitState} (bounded) and the {@link #onEvent} callback (run on the channel's event
 * thread, or on the thread that polls a polled channel). Thread-safe.
 *
 * <p>A connection that becomes unreachable unclosed is reported by a cleaner (a warning naming it
 * and where it was created) and its cm id destroyed; its queue pair and completion queues are
 * released by their own cleaners, each reported too (destroying the id and the QP in either order
 * is safe, see above). The channel holds a connection only weakly: keep a reference to one that
 * works through {@link #onEvent} callbacks.
 */
public final class RdmaConnection extends CmEndpoint implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaConnection.class);
    /** Infiniband CM reject reason: no listener on the service ID. */
    private static final int REJ_INVALID_SERVICE_ID = 8;

    /**
     * What a connect or accept may take beyond its bound: with a bound of T it returns (connected,
     * failed, or with {@link VerbsTimeoutException}) within T plus this margin, however many threads
     * set up connections on the same channel at once (platform or virtual). The margin is the
     * waking of the waiting thread and the making of its exception: the connection is CLOSED by
     * then, and its cm id, queue pair and queues are released right after on a thread of the
     * library (the kernel's connection manager answers each {@code rdma_destroy_id}, seconds under
     * load); {@link CmEventChannel#close} waits for that release.
     */
    public static final Duration BOUND_MARGIN = Duration.ofSeconds(1);

    /**
     * Platform threads for the native part of a close called on a virtual thread (a native call
     * pins its carrier, and many virtual threads closing at once, their connects timed out
     * together, would take the few carriers from the threads that still have to see their bound),
     * and for the closes of setups whose deadline passed (each on its own thread: not one after
     * another on the deadline timer's).
     */
    static final java.util.concurrent.ExecutorService RELEASERS = java.util.concurrent.Executors.newCachedThreadPool(
            Thread.ofPlatform().daemon().name("verbs4j-cm-release-", 0).factory());

    /**
     * Hands tasks to {@link #RELEASERS} from one thread of its own: the thread that queues one (a
     * setup whose deadline passed, the deadline timer) never waits for a releaser thread to be
     * started (a thread that starts one waits until it was scheduled: a hundred setups timing out
     * together, each starting one beside the releases already running, would wait seconds past
     * their bound on a loaded machine).
     *
     * <p>The releases of failed or timed-out setups ({@link #closeInBackground}) are held while
     * more of them come, until none came for {@link #RELEASE_QUIET_NANOS} (at most
     * {@link #RELEASE_HOLD_NANOS}): when setups time out together, their releases (system calls
     * the kernel's connection manager answers, each on a thread of its own) then run after the
     * callers of the whole burst returned, not beside the later ones, whose threads (or their one
     * or two carriers) they would take the processors from. A timeout handed on is never held.
     */
    private static final class ReleaseQueue {
        private static final java.util.concurrent.LinkedBlockingQueue<Runnable> QUEUE =
                new java.util.concurrent.LinkedBlockingQueue<>();

        static {
            Thread.ofPlatform().daemon().name("verbs4j-cm-release-queue").start(ReleaseQueue::serve);
        }

        private ReleaseQueue() {}

        private static void serve() {
            java.util.ArrayList<Runnable> held = new java.util.ArrayList<>();
            while (true) {
                Runnable task;
                try {
                    task = QUEUE.take();
                } catch (InterruptedException e) {
                    continue; // nobody interrupts this thread; the queue is served for the JVM's life
                }
                if (!(task instanceof Release)) {
                    start(task);
                    continue;
                }
                held.add(task);
                long until = System.nanoTime() + RELEASE_HOLD_NANOS;
                try {
                    for (long left; (left = until - System.nanoTime()) > 0; ) {
                        Runnable next = QUEUE.poll(
                                Math.min(left, RELEASE_QUIET_NANOS), java.util.concurrent.TimeUnit.NANOSECONDS);
                        if (next == null) {
                            break; // quiet: the burst is over
                        }
                        if (next instanceof Release) {
                            held.add(next);
                        } else {
                            start(next);
                        }
                    }
                } catch (InterruptedException e) {
                    // as above: the held ones start now
                }
                held.forEach(ReleaseQueue::start);
                held.clear();
            }
        }

        private static void start(Runnable task) {
            try {
                RELEASERS.execute(task);
            } catch (RuntimeException e) {
                LOG.warn("verbs4j: starting a connection's release failed: {}", e.toString(), e);
            }
        }
    }

    /** How long no release came before the held ones start ({@link ReleaseQueue}). */
    static final long RELEASE_QUIET_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(50);

    /** The longest a release is held while more come ({@link ReleaseQueue}). */
    static final long RELEASE_HOLD_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);

    /** Runs {@code task} on a {@link #RELEASERS} thread; queues it and returns at once. */
    static void releaseLater(Runnable task) {
        ReleaseQueue.QUEUE.add(task);
    }

    private final boolean active;
    private final ConnectOptions options;
    private final Set<org.verbs4j.Access> remoteAccess;
    private final int wantResponderResources, wantInitiatorDepth;
    private volatile ConnectionState state;
    private volatile CmEvent lastEvent;
    private volatile ConnectionFailedException.Reason failure;
    private volatile CmEvent failureEvent;
    private volatile BiConsumer<RdmaConnection, CmEvent> callback;
    private volatile byte[] peerPrivateData = new byte[0];
    private volatile int responderResources, initiatorDepth;
    private volatile InetSocketAddress peer, local;
    private boolean closed; // under lock
    /** The connection reached CONNECTED once (a DISCONNECTED right after is an established connection that ended). */
    private volatile boolean wasEstablished;
    /**
     * Active side: {@code rdma_establish} (the RTU) is under way or done, so the peer may see the
     * connection ESTABLISHED and disconnect before this side marked it CONNECTED (under lock).
     */
    private boolean establishing;
    // set once the queue pair exists (under idLock; volatile for the accessors of other threads)
    private volatile Context context;
    /** The device's attributes, from {@link CmDevices} (queried once per device, not per connection). */
    private volatile DeviceAttributes deviceAttributes;

    private volatile ProtectionDomain pd;
    private volatile CompletionQueue sendCq, recvCq;
    private volatile boolean ownsCqs;
    private volatile QueuePair qp;
    /** Setup steps of this connection running now (a release meanwhile may find their objects in use). */
    private final java.util.concurrent.atomic.AtomicInteger stepsRunning =
            new java.util.concurrent.atomic.AtomicInteger();
    /** Serialises the closing of the queue pair and the queues between a release and a setup step's end. */
    private final Object verbsLock = new Object();

    private final ConnectionSetup setup;
    /** A UD "connection" over RDMA_PS_UDP (SIDR): a UD queue pair, the peer's QPN/Q_Key and an address handle. */
    private final boolean ud;

    private volatile AddressHandle addressHandle;
    private volatile int remoteQpn = -1, remoteQkey, qkey;
    /** The connect or accept in progress (or done), moved on by this connection's events; null before. */
    private volatile SetupFuture setupFuture;

    RdmaConnection(
            CmEventChannel channel,
            CmEventChannel.IdState id,
            boolean active,
            boolean ud,
            ConnectionSetup setup,
            ConnectionState initial) {
        super(channel, id);
        this.ud = ud;
        this.active = active;
        this.setup = setup;
        this.options = setup.options;
        this.remoteAccess = setup.remoteAccess.isEmpty()
                ? EnumSet.noneOf(org.verbs4j.Access.class)
                : EnumSet.copyOf(setup.remoteAccess);
        this.wantResponderResources = setup.responderResources;
        this.wantInitiatorDepth = setup.initiatorDepth;
        this.state = initial;
        reportLeaks((ud ? "UD connection" : "RDMA connection") + (active ? " (active side)" : " (accepted)"), false);
    }

    // ---- the active side -------------------------------------------------------------------

    /** {@link #connect(CmEventChannel, InetSocketAddress, ConnectionSetup, byte[], Duration)} to {@code host:port} ({@code rdma_getaddrinfo}). */
    public static RdmaConnection connect(
            CmEventChannel channel,
            String host,
            int port,
            ConnectionSetup setup,
            byte[] privateData,
            Duration timeout) {
        return connect(channel, RdmaAddresses.resolve(host, port).get(0), setup, privateData, timeout);
    }

    /**
     * Connects to {@code remote} within {@code timeout} (plus {@link #BOUND_MARGIN}, however many
     * threads connect on the channel at once): {@link #create} then {@link #connect(
     * InetSocketAddress, byte[], Duration)}; on any failure the connection is closed (nothing
     * stays behind) and the exception thrown.
     */
    public static RdmaConnection connect(
            CmEventChannel channel,
            InetSocketAddress remote,
            ConnectionSetup setup,
            byte[] privateData,
            Duration timeout) {
        return startConnect(channel, remote, setup, privateData, timeout, false).await();
    }

    /**
     * The asynchronous {@link #connect(CmEventChannel, InetSocketAddress, ConnectionSetup, byte[],
     * Duration)}: returns at once with a future that completes with the CONNECTED connection, or
     * exceptionally with what the blocking call throws (the same exceptions, naming the verb), within
     * {@code timeout} ({@link VerbsTimeoutException} then). Every step after the first follows this
     * connection's events: on a channel with its own event thread, the route, the queue pair, the
     * request and the RTU are made on the library's setup threads (so that the event thread only
     * reads events and many setups proceed at once); on a polled channel, all on the
     * thread that calls {@link CmEventChannel#processEvents} (which must be called for the future
     * to complete, except by its timeout). One thread can so drive hundreds of connects. On
     * failure, timeout or {@link CompletableFuture#cancel cancel}, the connection is closed before the
     * future completes (its queue pair, queues and cm id released then or, after a failure or
     * timeout, right after: see {@link #BOUND_MARGIN}). Dependent actions that
     * are not {@code *Async} run on the thread that completes the future (the event thread, or a
     * setup thread): keep them short, or use the {@code *Async} forms. Argument errors and a closed
     * channel are thrown at once.
     */
    public static CompletableFuture<RdmaConnection> connectAsync(
            CmEventChannel channel,
            InetSocketAddress remote,
            ConnectionSetup setup,
            byte[] privateData,
            Duration timeout) {
        return startConnect(channel, remote, setup, privateData, timeout, false);
    }

    /** Creates an active connection (RC or UD) and starts its connect; the future closes it on any failure. */
    private static SetupFuture startConnect(
            CmEventChannel channel,
            InetSocketAddress remote,
            ConnectionSetup setup,
            byte[] privateData,
            Duration timeout,
            boolean ud) {
        long start = System.nanoTime();
        boolean bounded = !timeout.isNegative() && !timeout.isZero(); // (else refused by connect, naming it)
        long deadline = bounded ? Timeouts.deadline("rdma_connect", timeout) : start;
        CmEventChannel.IdState id = bounded
                ? channel.createId(ud ? LibRdmacm.RDMA_PS_UDP : LibRdmacm.RDMA_PS_TCP, deadline)
                : channel.createId(ud ? LibRdmacm.RDMA_PS_UDP : LibRdmacm.RDMA_PS_TCP);
        Duration left = timeout;
        if (bounded) {
            left = timeout.minusNanos(System.nanoTime() - start); // the wait for the id counts too
            if (id == null || left.isNegative() || left.isZero()) {
                if (id != null) {
                    id.destroy(false);
                }
                throw new VerbsTimeoutException(
                        "rdma_connect",
                        "the timeout of " + timeout + " ran out before the cm id was created (other setups held"
                                + " the channel)",
                        "allow more time, or spread concurrent setups over several channels");
            }
        }
        RdmaConnection c = create(channel, id, setup, ud);
        try {
            // the bound counts from this call's start: the id's and the connection's making count too
            return bounded
                    ? c.startConnect(remote, privateData, deadline, true)
                    : c.startConnect(remote, privateData, left, true);
        } catch (RuntimeException | Error e) {
            c.close();
            throw e;
        }
    }

    /**
     * A connection that is not connected yet (state IDLE, a cm id on {@code channel}): connect it
     * with {@link #connect(InetSocketAddress, byte[], Duration)}; another thread may
     * {@link #close()} it at any time, a connect in progress then throws
     * {@link ResourceClosedException}.
     */
    public static RdmaConnection create(CmEventChannel channel, ConnectionSetup setup) {
        return create(channel, setup, false);
    }

    private static RdmaConnection create(CmEventChannel channel, ConnectionSetup setup, boolean ud) {
        return create(channel, channel.createId(ud ? LibRdmacm.RDMA_PS_UDP : LibRdmacm.RDMA_PS_TCP), setup, ud);
    }

    private static RdmaConnection create(
            CmEventChannel channel, CmEventChannel.IdState id, ConnectionSetup setup, boolean ud) {
        RdmaConnection c = new RdmaConnection(channel, id, true, ud, setup, ConnectionState.IDLE);
        c.register();
        return c;
    }

    /**
     * A UD "connection" to a {@link CmListener#bindUd UD listener} at {@code remote} (librdmacm's
     * RDMA_PS_UDP: address and route resolution, then a service ID resolution request, SIDR): a
     * UD queue pair on the id's device, moved to RTS with the Q_Key the connection manager
     * assigns, and, once the listener accepted, the peer's QPN, Q_Key and an
     * {@link #addressHandle()} to post UD SENDs to it
     * ({@code wrs.send(..).destination(c.addressHandle(), c.remoteQpn(), c.remoteQkey())}).
     * Receives on a UD queue pair carry the 40-byte GRH first. Nothing is connected: the peer
     * sees no disconnect; {@link #close()} releases the address handle, queue pair, queues and id.
     * Bounded and failing as {@link #connect(CmEventChannel, InetSocketAddress, ConnectionSetup,
     * byte[], Duration)} does (REJECTED, NO_LISTENER, UNREACHABLE, timeouts).
     *
     * @param privateData sent with the request (at most 180 bytes; the peer sees them padded with zeros), or null
     */
    public static RdmaConnection connectUd(
            CmEventChannel channel,
            InetSocketAddress remote,
            ConnectionSetup setup,
            byte[] privateData,
            Duration timeout) {
        checkPrivateData("rdma_connect", privateData, 180);
        return startConnect(channel, remote, setup, privateData, timeout, true).await();
    }

    /**
     * Connects this IDLE connection to {@code remote} within {@code timeout} (address and route
     * resolution, each also bounded by the setup's timeouts, then the connection request): returns
     * once CONNECTED, or throws {@link ConnectionFailedException} naming the failure (address
     * error, route error, unreachable, no listener, rejected with the peer's private data, connect
     * error), {@link VerbsTimeoutException} when the time ran out, or
     * {@link ResourceClosedException} when {@link #close()} was called meanwhile. After a failure
     * the connection is FAILED: close it.
     *
     * @param privateData sent with the request (at most 56 bytes; the peer sees them padded with
     *                    zeros to 56), or null
     */
    public void connect(InetSocketAddress remote, byte[] privateData, Duration timeout) {
        startConnect(remote, privateData, timeout, false).await();
    }

    /**
     * The asynchronous {@link #connect(InetSocketAddress, byte[], Duration)} of this IDLE
     * connection: a future completed as {@link #connectAsync(CmEventChannel, InetSocketAddress,
     * ConnectionSetup, byte[], Duration)}'s is, except that a failure leaves this connection
     * FAILED (not closed): close it. Cancelling the future does not close it either.
     */
    public CompletableFuture<RdmaConnection> connectAsync(
            InetSocketAddress remote, byte[] privateData, Duration timeout) {
        return startConnect(remote, privateData, timeout, false);
    }

    /** Checks, then {@code rdma_resolve_addr} on this thread; the later steps follow the events ({@link #advanceSetup}). */
    private SetupFuture startConnect(InetSocketAddress remote, byte[] privateData, Duration timeout, boolean owns) {
        if (timeout.isNegative() || timeout.isZero()) {
            checkPrivateData("rdma_connect", privateData, ud ? 180 : 56);
            throw new InvalidRequestException("rdma_connect", "the timeout must be positive: " + timeout);
        }
        return startConnect(remote, privateData, Timeouts.deadline("rdma_connect", timeout), owns);
    }

    /** {@link #startConnect(InetSocketAddress, byte[], Duration, boolean)} bounded by {@code deadline} (a {@link System#nanoTime} value). */
    private SetupFuture startConnect(InetSocketAddress remote, byte[] privateData, long deadline, boolean owns) {
        checkPrivateData("rdma_connect", privateData, ud ? 180 : 56);
        synchronized (lock) {
            if (closed) {
                throw VerbsExceptions.closed(
                        "rdma_connect", "the connection is closed", "create a new connection to connect again");
            }
            if (state != ConnectionState.IDLE) {
                throw new InvalidRequestException(
                        "rdma_connect",
                        "the connection is " + state + ", not IDLE",
                        "connect a connection once; create another for another attempt");
            }
            state = ConnectionState.RESOLVING_ADDRESS;
        }
        peer = remote;
        SetupFuture f = new SetupFuture(
                this, deadline, owns, "resolving the address " + remote, ConnectionState.ADDRESS_RESOLVED);
        f.remote = remote;
        f.privateData = privateData;
        setupFuture = f;
        f.startTimer();
        try {
            resolveAddress(f);
        } catch (RuntimeException | Error e) {
            f.fail(e);
        }
        return f;
    }

    /**
     * Moves an asynchronous setup on after a state change (each step once): the route once the
     * address resolved, the queue pair and the request once the route resolved; completes the
     * future once CONNECTED (a connection that went down again at once was still made), fails it
     * once the connection failed, was removed or closed. Called after each event of this
     * connection, at close, and by the steps that run on the caller's thread.
     */
    void advanceSetup() {
        SetupFuture f = setupFuture;
        if (f == null || f.isDone()) {
            return;
        }
        try {
            switch (state) {
                case ADDRESS_RESOLVED -> {
                    if (f.step.compareAndSet(ConnectionState.ADDRESS_RESOLVED, ConnectionState.ROUTE_RESOLVED)) {
                        onSetupThread(f, () -> resolveRoute(f));
                    }
                }
                case ROUTE_RESOLVED -> {
                    if (f.step.compareAndSet(ConnectionState.ROUTE_RESOLVED, ConnectionState.CONNECTED)) {
                        onSetupThread(f, () -> connectQueuePair(f));
                    }
                }
                case CONNECTED, DISCONNECTED, TIMEWAIT_EXITED -> f.succeed();
                case FAILED, DEVICE_REMOVED, CLOSED -> f.fail(failureException(f.doing));
                default -> {}
            }
        } catch (RuntimeException | Error e) {
            f.fail(e);
        }
    }

    /**
     * Runs {@code step} (route resolution, the queue pair and the request or the accept, the
     * transitions to RTS and the RTU: every librdmacm and verbs call of a setup after its first)
     * on a setup thread of the library when the channel has its own event thread, so that the
     * event thread only reads and routes events and the steps of many connections run at once; on
     * a polled channel, here (the polling thread). A failure fails {@code f}.
     */
    private void onSetupThread(SetupFuture f, Runnable step) {
        Runnable run = () -> runStep(f, step);
        if (channel.isPolled()) {
            run.run();
        } else {
            SetupFuture.STEPS.execute(run);
        }
    }

    private void resolveAddress(SetupFuture f) {
        InetSocketAddress remote = f.remote;
        int addrMs = (int) Math.min(setup.addressTimeout.toMillis(), Math.max(1, left(f.deadline) / 1_000_000L));
        locked("rdma_resolve_addr", () -> {
            long t0 = SetupTimings.start();
            try (Arena a = Arena.ofConfined()) {
                LibRdmacm.resolveAddr(id, MemorySegment.NULL, CmStructs.sockaddr(a, remote), addrMs);
                SetupTimings.done("rdma_resolve_addr", t0);
            } catch (ConnectionFailedException e) {
                throw e;
            } catch (VerbsException e) { // refused at once: no route, no RDMA device for the address
                failSync(ConnectionFailedException.Reason.ADDRESS_ERROR, e);
                throw failureException("resolving the address " + remote);
            }
        });
    }

    private void resolveRoute(SetupFuture f) {
        InetSocketAddress remote = f.remote;
        f.doing = "resolving the route to " + remote;
        int routeMs = (int) Math.min(setup.routeTimeout.toMillis(), Math.max(1, left(f.deadline) / 1_000_000L));
        locked("rdma_resolve_route", () -> {
            if (CmStructs.verbs(id).address() == 0) { // librdmacm dereferences the id's device unchecked
                VerbsException e = VerbsException.create(
                        "rdma_resolve_route",
                        Errno.ENODEV,
                        "the cm id is bound to no RDMA device after its address resolved",
                        null);
                failSync(ConnectionFailedException.Reason.ADDRESS_ERROR, e);
                throw failureException("resolving the route to " + remote);
            }
            state = ConnectionState.RESOLVING_ROUTE;
            try {
                long t0 = SetupTimings.start();
                LibRdmacm.resolveRoute(id, routeMs);
                SetupTimings.done("rdma_resolve_route", t0);
            } catch (VerbsException e) {
                failSync(ConnectionFailedException.Reason.ROUTE_ERROR, e);
                throw failureException("resolving the route to " + remote);
            }
        });
    }

    private void connectQueuePair(SetupFuture f) {
        f.doing = "connecting to " + f.remote;
        byte[] privateData = f.privateData;
        createQueuePair(setup);
        if (setup.beforeConnect != null) {
            setup.beforeConnect.accept(this);
        }
        locked("rdma_connect", () -> {
            if (ud) {
                try (Arena a = Arena.ofConfined()) {
                    state = ConnectionState.CONNECTING;
                    LibRdmacm.connect(id, CmStructs.connParam(a, privateData, 0, 0, 0, 0, qp.qpNumber()));
                }
                return;
            }
            // no RDMA_OPTION_ID_ACK_TIMEOUT on the id: the kernel reads it only in route resolution
            // (done by now) and in rdma_init_qp_attr, whose timeout toReadyToSend replaces with the options'
            try (Arena a = Arena.ofConfined()) {
                DeviceAttributes d = deviceAttributes;
                int rr = Math.min(wantResponderResources, d.maxQpRdAtom());
                int depth = Math.min(wantInitiatorDepth, d.maxQpInitRdAtom());
                state = ConnectionState.CONNECTING;
                long t0 = SetupTimings.start();
                LibRdmacm.connect(
                        id,
                        CmStructs.connParam(
                                a, privateData, rr, depth, options.retryCount(), options.rnrRetry(), qp.qpNumber()));
                SetupTimings.done("rdma_connect", t0);
            }
        });
    }

    /**
     * Passive side ({@link ConnectionRequest#acceptAsync}): the queue pair, the setup's hook and
     * {@code accept} (the {@code rdma_accept} call, run under the id's lock) on this thread;
     * the future completes at ESTABLISHED, or fails (closing this connection) within the deadline.
     */
    SetupFuture startAccept(long deadline, String doing, boolean async, Runnable accept) {
        SetupFuture f = new SetupFuture(this, deadline, true, doing, ConnectionState.CONNECTED);
        setupFuture = f;
        f.startTimer();
        Runnable steps = () -> {
            createQueuePair(setup);
            if (setup.beforeConnect != null) {
                setup.beforeConnect.accept(this);
            }
            locked("rdma_accept", accept);
            advanceSetup(); // an event handled before the future was reachable, or UD: CONNECTED at once
        };
        if (async) {
            onSetupThread(f, steps); // the event thread (a request handler) goes on reading events
            return f;
        }
        runStep(f, steps);
        return f;
    }

    /**
     * Runs a setup step; a failure fails {@code f}. If the connection was closed meanwhile (its
     * deadline passed, or a close from another thread), closes what the release could not close
     * while the step was using it: the queue pair and the queues are closed once the step returns,
     * whichever thread gets there last.
     */
    private void runStep(SetupFuture f, Runnable step) {
        stepsRunning.incrementAndGet();
        try {
            step.run();
        } catch (RuntimeException | Error e) {
            f.fail(e);
        } finally {
            stepsRunning.decrementAndGet();
            boolean closedNow;
            synchronized (lock) {
                closedNow = closed;
            }
            if (closedNow) {
                releaseVerbs(false);
            }
        }
    }

    // ---- the queue pair ----------------------------------------------------------------------

    /**
     * PD, CQs and the QP on the id's device ({@code ibv_create_qp}; UD: {@code rdma_create_qp}),
     * then INIT with this setup's access. Holds the id's lock only while it reads the id and while
     * {@code rdma_create_qp} runs (the id is destroyed under that lock): the rest (queues, the queue pair's object, its transition) runs
     * beside the steps of other connections. A {@link #close()} meanwhile makes it close what it
     * made and throw.
     */
    void createQueuePair(ConnectionSetup s) {
        MemorySegment[] verbsOf = new MemorySegment[1];
        int[] portOf = new int[1];
        locked("rdma_create_qp", () -> {
            verbsOf[0] = CmStructs.verbs(id);
            portOf[0] = verbsOf[0].address() == 0 ? 0 : CmStructs.portNum(id);
        });
        MemorySegment verbs = verbsOf[0];
        if (verbs.address() == 0) {
            throw VerbsException.create(createVerb(), Errno.ENODEV, "the cm id is bound to no RDMA device", null);
        }
        CmDevices.Device dev = CmDevices.of(verbs);
        context = dev.context();
        deviceAttributes = dev.attributes();
        pd = s.pd != null ? s.pd : dev.pd();
        if (pd.context() != context) {
            throw new InvalidRequestException(
                    createVerb(),
                    "the protection domain is of another device context than " + "the connection's ("
                            + context.deviceName() + " as librdmacm opened it)",
                    "allocate it on CmEventChannel.deviceContext(address), or pass none");
        }
        checkCapacities(s, deviceAttributes);
        long t0 = SetupTimings.start();
        if (s.sendCq != null) {
            sendCq = s.sendCq;
            recvCq = s.recvCq;
        } else {
            sendCq = context.createCompletionQueue(s.maxSendWr);
            try {
                recvCq = context.createCompletionQueue(s.maxRecvWr);
            } catch (RuntimeException e) {
                sendCq.close();
                throw e;
            }
            ownsCqs = true;
            SetupTimings.done("ibv_create_cq x2", t0);
        }
        QueuePairInit init = QueuePairInit.of(ud ? QueuePairType.UD : QueuePairType.RC, sendCq, recvCq)
                .maxSendWr(s.maxSendWr)
                .maxRecvWr(s.maxRecvWr)
                .maxSendSge(s.maxSendSge)
                .maxRecvSge(s.maxRecvSge)
                .maxInlineData(s.maxInlineData)
                .signalAll(s.signalAll)
                .sharedReceiveQueue(s.srq);
        MemorySegment cmId = id;
        t0 = SetupTimings.start();
        QueuePair made;
        try {
            // RC: ibv_create_qp, RESET, which the library moves to INIT itself below (rdma_create_qp
            // would make it INIT with rdma_init_qp_attr and an ibv_modify_qp of its own, undone by ours)
            made = CoreAccess.get()
                    .createQueuePair(
                            pd,
                            init,
                            ud
                                    ? (pdHandle, attr) -> {
                                        MemorySegment[] q = new MemorySegment[1];
                                        locked("rdma_create_qp", () -> {
                                            LibRdmacm.createQp(cmId, pdHandle, attr);
                                            q[0] = CmStructs.qp(cmId);
                                            // the library makes every transition itself: librdmacm must not
                                            // touch the QP (it would re-grant its own access flags and take the
                                            // peer's retry count, 7 from rping)
                                            CmStructs.setQp(cmId, MemorySegment.NULL);
                                        });
                                        return q[0];
                                    }
                                    : LibIbverbs::createQp,
                            LibIbverbs::destroyQp);
            SetupTimings.done(ud ? "rdma_create_qp" : "ibv_create_qp", t0);
        } catch (VerbsException e) {
            closeQueues();
            if (e.errno() != Errno.EINVAL || !("rdma_create_qp".equals(e.verb()) || "ibv_create_qp".equals(e.verb()))) {
                throw e;
            }
            throw new InvalidRequestException(
                    e.verb(),
                    Errno.EINVAL,
                    context.deviceName() + " refused the queue pair's capacities (maxSendWr " + s.maxSendWr
                            + ", maxRecvWr " + s.maxRecvWr + ", maxSendSge " + s.maxSendSge + ", maxRecvSge "
                            + s.maxRecvSge + ", maxInlineData " + s.maxInlineData + ")"
                            + (active || !ud
                                    ? ""
                                    : ", or the connection request is no longer pending (the peer gave up or"
                                            + " its connect timed out before this accept)"),
                    "lower them in the ConnectionSetup: maxInlineData first (the device's limit is not "
                            + "queryable; rxe takes a few hundred bytes), then the work requests and SGEs"
                            + (active || !ud
                                    ? ""
                                    : "; if they are within the device's limits, give the peer a longer connect"
                                            + " timeout or accept sooner"));
        } catch (RuntimeException e) {
            closeQueues();
            throw e;
        }
        qp = made;
        boolean closedMeanwhile;
        synchronized (lock) { // close() sets closed, then reads qp: one of the two sees the other
            closedMeanwhile = closed;
        }
        if (closedMeanwhile) { // close() may have seen it too: releaseVerbs runs once at a time
            releaseVerbs(true);
            throw failureException("creating the queue pair");
        }
        if (ud) {
            // rdma_create_qp took a UD QP to RTS itself; the library redoes it so that its QueuePair
            // knows the state: RESET, then INIT (with the CM's Q_Key), RTR, RTS
            int[] qkeyOf = new int[1];
            locked("rdma_create_qp", () -> qkeyOf[0] = CmStructs.udQkey(id));
            qkey = qkeyOf[0];
            qp.reset();
            qp.activateUd(portOf[0], qkey, 0);
            return;
        }
        t0 = SetupTimings.start();
        qp.toInit(portOf[0], remoteAccess); // RESET -> INIT: least privilege
        SetupTimings.done("ibv_modify_qp INIT", t0);
    }

    /** The verb that makes this connection's queue pair: librdmacm's for UD (it takes the Q_Key), else the verbs'. */
    private String createVerb() {
        return ud ? "rdma_create_qp" : "ibv_create_qp";
    }

    /** The setup's queue sizes against the device's limits, before any queue pair is made. */
    private void checkCapacities(ConnectionSetup s, DeviceAttributes d) {
        int[][] checks = {
            {s.maxSendWr, d.maxQpWr()},
            {s.maxRecvWr, d.maxQpWr()},
            {s.maxSendSge, d.maxSge()},
            {s.maxRecvSge, d.maxSge()}
        };
        String[] names = {"maxSendWr", "maxRecvWr", "maxSendSge", "maxRecvSge"};
        for (int i = 0; i < checks.length; i++) {
            if (checks[i][0] > checks[i][1]) {
                throw new InvalidRequestException(
                        createVerb(),
                        names[i] + " " + checks[i][0] + " is more than " + context.deviceName() + " allows: at most "
                                + checks[i][1],
                        "set " + names[i] + " to at most " + checks[i][1] + " in the ConnectionSetup");
            }
        }
    }

    /** Under idLock: INIT -> RTR -> RTS with librdmacm's path and this library's limits. */
    private void toReadyToSend(int peerResponderResources, int peerInitiatorDepth) {
        DeviceAttributes d = deviceAttributes;
        CoreAccess core = CoreAccess.get();
        long t0 = SetupTimings.start();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = CmStructs.qpAttr(a);
            int rr = Math.min(Math.min(wantResponderResources, d.maxQpRdAtom()), active ? 255 : peerInitiatorDepth);
            int m = CmStructs.transitionAttributes(a, id, attr, false, rr, options);
            core.modify(qp, attr, m, QueuePairState.RTR);
            attr.fill((byte) 0);
            int depth = Math.min(Math.min(wantInitiatorDepth, d.maxQpInitRdAtom()), peerResponderResources);
            m = CmStructs.transitionAttributes(a, id, attr, true, depth, options);
            core.modify(qp, attr, m, QueuePairState.RTS);
            responderResources = rr;
            initiatorDepth = depth;
        }
        SetupTimings.done("ibv_modify_qp RTR RTS", t0);
    }

    /** Passive side, under idLock: the queue pair to RTS, then {@code rdma_accept}. */
    void acceptNow(byte[] privateData, int peerResponderResources, int peerInitiatorDepth) {
        if (ud) { // the QP is RTS already; the SIDR reply carries its QPN and the Q_Key; no ESTABLISHED follows
            try (Arena a = Arena.ofConfined()) {
                LibRdmacm.accept(id, CmStructs.connParam(a, privateData, 0, 0, 0, 0, qp.qpNumber()));
            }
            synchronized (lock) {
                if (state == ConnectionState.ACCEPTING) {
                    local = CmStructs.localAddress(id);
                    state = ConnectionState.CONNECTED;
                }
                lock.notifyAll();
            }
            return;
        }
        try {
            toReadyToSend(peerResponderResources, peerInitiatorDepth);
        } catch (VerbsException e) {
            if (e.errno() != Errno.EINVAL || !"rdma_init_qp_attr".equals(e.verb())) {
                throw e;
            }
            // the id has no pending request to take the path from: the peer's connect ended first
            // (rxe's connection manager does not tell this side)
            throw ConnectionRequest.noLongerPending("rdma_init_qp_attr", peer, null);
        }
        long t0 = SetupTimings.start();
        try (Arena a = Arena.ofConfined()) {
            LibRdmacm.accept(
                    id,
                    CmStructs.connParam(
                            a,
                            privateData,
                            responderResources,
                            initiatorDepth,
                            options.retryCount(),
                            options.rnrRetry(),
                            qp.qpNumber()));
        }
        SetupTimings.done("rdma_accept", t0);
    }

    // ---- events ------------------------------------------------------------------------------

    @Override
    void handle(CmStructs.Copied raw, CmEvent e) {
        lastEvent = e;
        switch (e.type()) {
            case ADDR_RESOLVED -> advance(ConnectionState.RESOLVING_ADDRESS, ConnectionState.ADDRESS_RESOLVED);
            case ROUTE_RESOLVED -> advance(ConnectionState.RESOLVING_ROUTE, ConnectionState.ROUTE_RESOLVED);
            case ADDR_ERROR -> fail(ConnectionFailedException.Reason.ADDRESS_ERROR, e);
            case ROUTE_ERROR -> fail(ConnectionFailedException.Reason.ROUTE_ERROR, e);
            case UNREACHABLE -> fail(ConnectionFailedException.Reason.UNREACHABLE, e);
            case REJECTED ->
                fail(
                        e.status() == REJ_INVALID_SERVICE_ID
                                ? ConnectionFailedException.Reason.NO_LISTENER
                                : ConnectionFailedException.Reason.REJECTED,
                        e);
            case CONNECT_ERROR -> fail(ConnectionFailedException.Reason.CONNECT_ERROR, e);
            case CONNECT_RESPONSE -> {
                SetupFuture f = setupFuture;
                if (f == null || f.isDone()) {
                    completeActive(e);
                } else {
                    onSetupThread(f, () -> {
                        completeActive(e);
                        advanceSetup();
                    });
                }
            }
            case ESTABLISHED -> {
                if (ud && active) {
                    udEstablished(raw.ud(), e);
                } else {
                    established(e);
                }
            }
            case DISCONNECTED -> peerDisconnected(e);
            case TIMEWAIT_EXIT -> advance(ConnectionState.DISCONNECTED, ConnectionState.TIMEWAIT_EXITED);
            case DEVICE_REMOVAL -> deviceRemoved(e);
            case null, default -> {}
        }
        advanceSetup();
        BiConsumer<RdmaConnection, CmEvent> cb = callback;
        if (cb != null) {
            try {
                cb.accept(this, e);
            } catch (RuntimeException | Error x) { // an Error too: the channel keeps dispatching
                LOG.warn("verbs4j: a connection's event callback threw: {}", x.toString(), x);
            }
        }
    }

    private void advance(ConnectionState from, ConnectionState to) {
        synchronized (lock) {
            if (state == from) {
                state = to;
            }
            lock.notifyAll();
        }
    }

    private void fail(ConnectionFailedException.Reason reason, CmEvent e) {
        synchronized (lock) {
            ConnectionState s = state;
            if (s == ConnectionState.CLOSED || s.isDown()) {
                lock.notifyAll();
                return;
            }
            if (s == ConnectionState.CONNECTED) {
                state = ConnectionState.DISCONNECTED; // an error after establishment ends it
            } else {
                failure = reason;
                failureEvent = e;
                state = ConnectionState.FAILED;
            }
            lock.notifyAll();
        }
        flushQueuePair();
    }

    /** A call that failed at once: FAILED with {@code reason}, the errno as the status of a made-up event. */
    private void failSync(ConnectionFailedException.Reason reason, VerbsException e) {
        fail(
                reason,
                new CmEvent(
                        reason == ConnectionFailedException.Reason.ADDRESS_ERROR
                                ? CmEventType.ADDR_ERROR
                                : CmEventType.ROUTE_ERROR,
                        "refused at once by " + briefly(e),
                        -e.errno(),
                        new byte[0],
                        0,
                        0));
    }

    /**
     * A failure as part of another message: its verb, errno and detail, without its own "failed"
     * and hint (one level of "failed" per message; the outer message has its own hint).
     */
    static String briefly(RuntimeException x) {
        if (!(x instanceof VerbsException v)) {
            return x.toString();
        }
        String m = v.getMessage();
        String failed = v.verb() + " failed: ";
        if (m.startsWith(failed)) {
            m = v.verb() + ": " + m.substring(failed.length());
        }
        int hint = m.indexOf(". Hint: ");
        return hint < 0 ? m : m.substring(0, hint);
    }

    private void completeActive(CmEvent e) {
        idLock.lock();
        try {
            if (!stillConnecting()) {
                return;
            }
            try {
                toReadyToSend(e.responderResources(), e.initiatorDepth());
                InetSocketAddress from = CmStructs.peerAddress(id), at = CmStructs.localAddress(id);
                synchronized (lock) { // a DISCONNECTED read meanwhile is of an established connection
                    if (closed || state != ConnectionState.CONNECTING) {
                        return;
                    }
                    establishing = true;
                    peerPrivateData = e.privateData();
                    peer = from != null ? from : peer;
                    local = at;
                }
                long t0 = SetupTimings.start();
                LibRdmacm.establish(id);
                SetupTimings.done("rdma_establish", t0);
            } catch (RuntimeException x) {
                LOG.debug("completing the connection failed: {}", x.getMessage());
                try {
                    LibRdmacm.reject(id, MemorySegment.NULL, 0);
                } catch (RuntimeException ignored) {
                    // the failure below is what counts
                }
                fail(
                        ConnectionFailedException.Reason.CONNECT_ERROR,
                        new CmEvent(
                                CmEventType.CONNECT_ERROR,
                                e.name() + " (then " + briefly(x) + ")",
                                e.status(),
                                e.privateData(),
                                0,
                                0));
                return;
            }
        } finally {
            idLock.unlock();
        }
        established(e);
    }

    private boolean stillConnecting() {
        synchronized (lock) {
            return !closed && state == ConnectionState.CONNECTING;
        }
    }

    /** Active UD side: the listener's QPN, Q_Key and path; the address handle to reach it. */
    private void udEstablished(CmStructs.UdParams p, CmEvent e) {
        idLock.lock();
        try {
            if (!stillConnecting()) {
                return;
            }
            try {
                addressHandle = pd.createAddressHandle(p.vector());
            } catch (RuntimeException x) {
                fail(
                        ConnectionFailedException.Reason.CONNECT_ERROR,
                        new CmEvent(
                                CmEventType.CONNECT_ERROR,
                                e.name() + " (then " + briefly(x) + ")",
                                e.status(),
                                e.privateData(),
                                0,
                                0));
                return;
            }
            remoteQpn = p.qpNumber();
            remoteQkey = p.qkey();
        } finally {
            idLock.unlock();
        }
        established(e);
    }

    private void established(CmEvent e) {
        synchronized (lock) {
            if (state != ConnectionState.CONNECTING && state != ConnectionState.ACCEPTING) {
                lock.notifyAll();
                return;
            }
            wasEstablished = true;
            if (!establishing) { // (else completeActive read them, under the id's lock)
                if (active) {
                    peerPrivateData = e.privateData();
                }
                peer = CmStructs.peerAddress(id) != null ? CmStructs.peerAddress(id) : peer;
                local = CmStructs.localAddress(id);
            }
            state = ConnectionState.CONNECTED;
            lock.notifyAll();
        }
    }

    private void peerDisconnected(CmEvent e) {
        boolean wasUp;
        synchronized (lock) {
            ConnectionState s = state;
            wasUp = s == ConnectionState.CONNECTED;
            if ((s == ConnectionState.ACCEPTING && !ud) || (s == ConnectionState.CONNECTING && establishing)) {
                // the peer disconnects only once established on its side: it confirmed the accept (or
                // got this side's RTU, sent on a setup thread) and closed before the confirmation was
                // seen here; a connection made that then ended
                wasEstablished = true;
                wasUp = true;
                state = ConnectionState.DISCONNECTED;
            } else if (s == ConnectionState.CONNECTING || s == ConnectionState.ACCEPTING) {
                failure = ConnectionFailedException.Reason.PEER_DISCONNECTED;
                failureEvent = e;
                state = ConnectionState.FAILED;
            } else if (wasUp) {
                state = ConnectionState.DISCONNECTED;
            }
            lock.notifyAll();
        }
        flushQueuePair();
        idLock.lock();
        try {
            if (!idDestroyed() && wasUp) {
                LibRdmacm.disconnect(id); // the DREP; librdmacm leaves the QP to us
            }
        } catch (RuntimeException x) {
            LOG.debug("rdma_disconnect after the peer's: {}", x.getMessage());
        } finally {
            idLock.unlock();
        }
    }

    private void deviceRemoved(CmEvent e) {
        synchronized (lock) {
            if (state != ConnectionState.CLOSED) {
                failure = ConnectionFailedException.Reason.DEVICE_REMOVAL;
                failureEvent = e;
                state = ConnectionState.DEVICE_REMOVED;
            }
            lock.notifyAll();
        }
        flushQueuePair();
        idLock.lock(); // a close on another thread destroys the id under this lock
        try {
            MemorySegment verbs = idDestroyed() ? MemorySegment.NULL : CmStructs.verbs(id);
            if (verbs.address() != 0) {
                CmDevices.removed(verbs);
            }
        } finally {
            idLock.unlock();
        }
    }

    /** Moves the queue pair to ERR (its outstanding work flushes with WR_FLUSH_ERR), if it exists and is open. */
    private void flushQueuePair() {
        idLock.lock();
        // under verbsLock too: a close on another thread (after awaitDisconnect saw DISCONNECTED, set
        // before this runs) must not destroy the queue pair while it is being moved to ERR (EBUSY: leaked)
        try {
            synchronized (verbsLock) {
                QueuePair q = qp;
                if (q != null && q.isOpen() && q.state() != QueuePairState.ERR && q.state() != QueuePairState.RESET) {
                    q.toError();
                }
            }
        } catch (RuntimeException x) {
            LOG.debug("moving the queue pair to ERR: {}", x.getMessage());
        } finally {
            idLock.unlock();
        }
    }

    // ---- waiting -----------------------------------------------------------------------------

    private static long left(long deadline) {
        return deadline - System.nanoTime();
    }

    /** Waits for {@code target} (or a failure) until the deadline; throws what stopped it. */
    void awaitProgress(ConnectionState target, long deadline, String doing) {
        ConnectionState s = await(
                Duration.ofNanos(Math.max(0, left(deadline))),
                () -> {
                    ConnectionState now = state;
                    return now.ordinal() >= target.ordinal() || now == ConnectionState.FAILED ? now : null;
                },
                () -> timeoutException(target, doing));
        if (s == target
                || target == ConnectionState.CONNECTED
                        && wasEstablished
                        && (s == ConnectionState.DISCONNECTED || s == ConnectionState.TIMEWAIT_EXITED)) {
            return; // connected; ended since by the peer (or this side): still a connection that was made
        }
        throw failureException(doing);
    }

    /** The exception of a setup step that got no answer in time ({@code target}: the state it waited for). */
    VerbsTimeoutException timeoutException(ConnectionState target, String doing) {
        return timeoutException(verbFor(target), doing, state, lastEvent);
    }

    /**
     * The exception of a setup step that got no answer in time. Its message is built without
     * string concatenation: each concatenation site is linked on its first run, by every thread
     * that runs it then (a hundred setups timing out together in a fresh JVM did so at once).
     */
    static VerbsTimeoutException timeoutException(String verb, String doing, ConnectionState state, CmEvent lastEvent) {
        StringBuilder detail = new StringBuilder("no answer within the timeout while ")
                .append(doing)
                .append(" (state ")
                .append(state);
        if (lastEvent != null) {
            detail.append(", last event ")
                    .append(lastEvent.name())
                    .append(" (status ")
                    .append(lastEvent.status())
                    .append(')');
        }
        return new VerbsTimeoutException(
                verb,
                detail.append(')').toString(),
                "check that the peer is up and listening, or allow more time (TCG guests are slow)");
    }

    /**
     * The verb of the step that waits for {@code target}. An if-chain, not a switch on the enum:
     * that switch's class would be loaded at the first timeout, by every setup timing out then.
     */
    private String verbFor(ConnectionState target) {
        if (target == ConnectionState.ADDRESS_RESOLVED) {
            return "rdma_resolve_addr";
        }
        if (target == ConnectionState.ROUTE_RESOLVED) {
            return "rdma_resolve_route";
        }
        if (target == ConnectionState.CONNECTED) {
            return setupVerb();
        }
        return "rdma_get_cm_event";
    }

    /**
     * Loads and links the classes a timed-out setup uses here ({@link SetupFuture#prepareTimeouts}):
     * the release that {@link #closeInBackground} queues.
     */
    static void prepareTimeoutPath() throws IllegalAccessException {
        java.lang.invoke.MethodHandles.lookup().ensureInitialized(Release.class);
    }

    /** The verb of this side's setup: {@code rdma_connect} (active) or {@code rdma_accept} (passive). */
    private String setupVerb() {
        return active ? "rdma_connect" : "rdma_accept";
    }

    /** The exception for the state this connection ended in. */
    RuntimeException failureException(String doing) {
        ConnectionState s = state;
        if (s == ConnectionState.CLOSED) {
            return new ResourceClosedException(
                    setupVerb(),
                    "the connection was closed while " + doing,
                    "do not close a connection another thread is still setting up, or expect this");
        }
        ConnectionFailedException.Reason r = failure;
        CmEvent e = failureEvent;
        if (r == null) {
            return new ResourceClosedException(setupVerb(), "the connection ended (" + s + ") while " + doing, null);
        }
        int errno = switch (r) {
            case ADDRESS_ERROR, ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR ->
                e != null && e.status() < 0
                        ? -e.status()
                        : r == ConnectionFailedException.Reason.UNREACHABLE ? Errno.EHOSTUNREACH : Errno.EIO;
            case NO_LISTENER, REJECTED -> Errno.ECONNREFUSED;
            case PEER_DISCONNECTED -> Errno.ECONNRESET;
            case DEVICE_REMOVAL -> Errno.ENODEV;
        };
        String hint = switch (r) {
            case ADDRESS_ERROR ->
                "the address is not reachable through an RDMA device (check the address, the route, "
                        + "and that the peer's interface has an RDMA device)";
            case ROUTE_ERROR -> "no path to the peer: check the subnet and the RDMA link";
            case UNREACHABLE -> "the peer did not answer: is it up, and does its RDMA device work?";
            case NO_LISTENER -> "nobody listens on that port at the peer";
            case REJECTED ->
                active
                        ? "the peer's application refused: see peerPrivateData() for what it said"
                        : "the peer gave up on its connect (its bound ran out, or it closed) before the accept "
                                + "completed: answer requests sooner, or ask the peer for a longer bound";
            case CONNECT_ERROR -> "the connection could not be completed: see the event's status";
            case PEER_DISCONNECTED -> "the peer disconnected before the connection was established";
            case DEVICE_REMOVAL -> "the RDMA device was removed";
        };
        return new ConnectionFailedException(
                r, setupVerb(), errno, r + " while " + doing + (e != null ? ": " + e : ""), hint, e);
    }

    /**
     * Waits up to {@code timeout} until the state is one of {@code states}; returns the state
     * reached (or a final one: FAILED, DEVICE_REMOVED, CLOSED), or throws
     * {@link VerbsTimeoutException}.
     */
    public ConnectionState awaitState(Set<ConnectionState> states, Duration timeout) {
        return await(
                timeout,
                () -> {
                    ConnectionState s = state;
                    return states.contains(s)
                                    || s == ConnectionState.FAILED
                                    || s == ConnectionState.DEVICE_REMOVED
                                    || s == ConnectionState.CLOSED
                            ? s
                            : null;
                },
                () -> new VerbsTimeoutException(
                        "rdma_get_cm_event",
                        "the connection stayed " + state + " for " + timeout + " (waited for " + states + ")",
                        null));
    }

    /** Waits up to {@code timeout} for the connection to go down (disconnected by either side, failed, removed, closed); false on timeout. */
    public boolean awaitDisconnect(Duration timeout) {
        try {
            awaitState(EnumSet.of(ConnectionState.DISCONNECTED, ConnectionState.TIMEWAIT_EXITED), timeout);
            return true;
        } catch (VerbsTimeoutException e) {
            return false;
        }
    }

    // ---- accessors ---------------------------------------------------------------------------

    /** Returns where the connection is now. */
    public ConnectionState state() {
        return state;
    }

    /** The RC queue pair (null before it was created, i.e. during address and route resolution). */
    public QueuePair queuePair() {
        return qp;
    }

    /** Returns the completion queue of the send queue (null before the queue pair exists). */
    public CompletionQueue sendCompletionQueue() {
        return sendCq;
    }

    /** Returns the completion queue of the receive queue (null before the queue pair exists). */
    public CompletionQueue receiveCompletionQueue() {
        return recvCq;
    }

    /** Whether this is a UD connection ({@link #connectUd}, or accepted from a {@link CmListener#bindUd UD listener}). */
    public boolean isDatagram() {
        return ud;
    }

    /**
     * UD, active side: the peer's queue pair number from the listener's SIDR reply (-1 before
     * CONNECTED, and on the accepting side, which learns each sender's QPN from its receive
     * completions, {@code WorkCompletions.sourceQp}).
     */
    public int remoteQpn() {
        return remoteQpn;
    }

    /** UD, active side: the peer's Q_Key (0 before CONNECTED, and on the accepting side). */
    public int remoteQkey() {
        return remoteQkey;
    }

    /** UD: the Q_Key of this side's queue pair (the connection manager's), 0 for RC. */
    public int qkey() {
        return qkey;
    }

    /**
     * UD, active side: the address handle to the peer (owned by this connection, closed with
     * it); null before CONNECTED, for RC, and on the accepting side (which builds one from a
     * received GRH: {@code Gid.read(grh, 8)} is the sender's GID; for RoCE v2 over IPv4 the 40 bytes
     * are 20 zeros and the IPv4 header, the sender's address at offset 32, {@code Gid.ofAddress}).
     */
    public AddressHandle addressHandle() {
        return addressHandle;
    }

    /** The protection domain of the queue pair: the setup's, or the library's one for the device. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** The device as librdmacm opened it (null before address resolution). */
    public Context context() {
        return context;
    }

    /** The peer's address (as asked for, then as librdmacm reports it once connected). */
    public InetSocketAddress peerAddress() {
        return peer;
    }

    /** This side's address, once connected (null before). */
    public InetSocketAddress localAddress() {
        return local;
    }

    /** The private data the peer sent with its accept (active side) or its request (passive side); a copy. */
    public byte[] peerPrivateData() {
        return peerPrivateData.clone();
    }

    void peerPrivateData(byte[] data) {
        peerPrivateData = data.clone();
    }

    void addresses(InetSocketAddress peer, InetSocketAddress local) {
        this.peer = peer;
        this.local = local;
    }

    /** RDMA READ/atomic requests the peer may have in flight against this side (as set on the queue pair). */
    public int responderResources() {
        return responderResources;
    }

    /** RDMA READ/atomic requests this side may have in flight (as set on the queue pair). */
    public int initiatorDepth() {
        return initiatorDepth;
    }

    /** The transport options the queue pair was connected with (retry count at most 6). */
    public ConnectOptions connectOptions() {
        return options;
    }

    /** The last connection-manager event of this connection, or null. */
    public CmEvent lastEvent() {
        return lastEvent;
    }

    /**
     * Calls {@code callback} with every later event of this connection (disconnect, time-wait exit,
     * device removal, …), on the channel's event thread or the thread polling a polled channel.
     * A callback may close the connection. Null removes it.
     */
    public void onEvent(BiConsumer<RdmaConnection, CmEvent> callback) {
        this.callback = callback;
    }

    // ---- disconnect and close ------------------------------------------------------------------

    /**
     * Disconnects: the queue pair moves to ERR (its outstanding work completes with WR_FLUSH_ERR),
     * the peer is told ({@code rdma_disconnect}) and sees DISCONNECTED. After the peer
     * disconnected, it only makes sure the queue pair is in ERR when it returns; in any other
     * state than CONNECTED it does nothing (a connect in progress is abandoned by {@link #close()}).
     * Idempotent.
     */
    public void disconnect() {
        boolean byPeer;
        synchronized (lock) {
            byPeer = state == ConnectionState.DISCONNECTED;
            if (state == ConnectionState.CONNECTED) {
                state = ConnectionState.DISCONNECTED;
                lock.notifyAll();
            }
        }
        if (byPeer) {
            // the event thread may not have moved the queue pair to ERR yet: do it (or wait for it,
            // under idLock), so that the queue pair is in ERR whenever this returns
            flushQueuePair();
            return;
        }
        flushQueuePair();
        idLock.lock();
        try {
            if (!idDestroyed()) {
                LibRdmacm.disconnect(id);
            }
        } catch (RuntimeException x) {
            LOG.debug("rdma_disconnect: {}", x.getMessage());
        } finally {
            idLock.unlock();
        }
    }

    /**
     * Closes the connection in whatever state it is: disconnects if connected, closes the queue
     * pair and the completion queues it created, destroys the cm id. Waits at most the queue
     * pair's close bound (a post in progress on another thread). A second call does nothing.
     */
    @Override
    public void close() {
        Boolean wasConnected = markClosed();
        if (wasConnected == null) {
            return;
        }
        try {
            if (Thread.currentThread().isVirtual()) {
                // a platform thread makes the native calls; this one waits unmounted (not interruptibly:
                // a close completes)
                CompletableFuture.runAsync(() -> release(wasConnected), RELEASERS)
                        .join();
            } else {
                release(wasConnected);
            }
        } catch (java.util.concurrent.CompletionException e) {
            throw e.getCause() instanceof RuntimeException r ? r : e;
        } finally {
            advanceSetup(); // a connect or accept in progress fails (its resources are released by now)
        }
    }

    /** CLOSED from now on; whether it was CONNECTED, or null when it was closed already. */
    private Boolean markClosed() {
        synchronized (lock) {
            if (closed) {
                return null;
            }
            closed = true;
            boolean wasConnected = state == ConnectionState.CONNECTED;
            state = ConnectionState.CLOSED;
            lock.notifyAll();
            return wasConnected;
        }
    }

    /**
     * {@link #close()} for a connect or accept that failed or timed out: CLOSED at once, the native
     * release (disconnect, cm id, queue pair, queues: the kernel's connection manager may take
     * seconds to answer for each under load) on a releaser thread, so that the caller gets its
     * exception at its deadline; counted by the channel until done ({@link CmEventChannel#close}
     * waits for it). {@code deadline}: the setup's, for {@link SetupTimings}.
     */
    void closeInBackground(long deadline) {
        Boolean wasConnected = markClosed();
        if (wasConnected == null) {
            return;
        }
        channel.core().releasing.incrementAndGet();
        releaseLater(new Release(wasConnected, deadline));
    }

    /**
     * The release of {@link #closeInBackground} (a class, not a lambda: a lambda is linked on its
     * first run, by the thread that runs it, and that would be a caller at its deadline).
     */
    private final class Release implements Runnable {
        private final boolean wasConnected;
        private final long deadline;

        Release(boolean wasConnected, long deadline) {
            this.wasConnected = wasConnected;
            this.deadline = deadline;
        }

        @Override
        public void run() {
            try {
                release(wasConnected);
                SetupTimings.late("connection released", deadline);
            } catch (RuntimeException | Error e) {
                LOG.warn("verbs4j: releasing a connection whose setup failed: {}", e.toString(), e);
            } finally {
                channel.core().releasing.decrementAndGet();
            }
        }
    }

    /** Disconnects if it was connected, destroys the id, closes the queue pair and the queues (once, from close). */
    private void release(boolean wasConnected) {
        // under the id's lock only the disconnect; a setup step of this connection ran before (its
        // queue pair is seen below) or sees it closed
        AddressHandle ah;
        idLock.lock();
        try {
            if (wasConnected && !ud) {
                try {
                    if (qp != null && qp.isOpen()) {
                        qp.toError();
                    }
                    LibRdmacm.disconnect(id);
                } catch (RuntimeException x) {
                    LOG.debug("disconnecting on close: {}", x.getMessage());
                }
            }
            ah = addressHandle;
        } finally {
            idLock.unlock();
        }
        destroyId(); // takes the lock only to mark the id destroyed; rdma_destroy_id runs outside it

        // the verbs objects outside it: many connections closing at once do not queue behind each other
        if (ah != null && ah.isOpen()) {
            try {
                ah.close();
            } catch (VerbsException x) {
                LOG.warn("verbs4j: closing a UD connection's address handle failed: {}", x.getMessage());
            }
        }
        // a setup step still running may hold them in use: it closes them when it returns (runStep)
        releaseVerbs(stepsRunning.get() > 0);
    }

    /**
     * Closes the queue pair, then the queues the connection made; one thread at a time, so that a
     * release and the end of a setup step never close them concurrently. {@code stepRunning}: a
     * failure is expected (the step uses them) and retried when the step returns, so not a warning.
     */
    private void releaseVerbs(boolean stepRunning) {
        synchronized (verbsLock) {
            QueuePair q = qp;
            if (q != null && q.isOpen()) {
                closeLogged(q::close, "queue pair", stepRunning);
            }
            closeQueues(stepRunning);
        }
    }

    private void closeQueues() {
        synchronized (verbsLock) {
            closeQueues(false);
        }
    }

    private void closeQueues(boolean stepRunning) {
        if (!ownsCqs) {
            return;
        }
        for (CompletionQueue q : new CompletionQueue[] {sendCq, recvCq}) {
            if (q != null && q.isOpen()) {
                closeLogged(q::close, "completion queue", stepRunning);
            }
        }
    }

    /** Closes one of the connection's objects; a failure is a warning, or debug while a step may use it. */
    private static void closeLogged(Runnable close, String what, boolean stepRunning) {
        try {
            close.run();
        } catch (VerbsException x) {
            if (stepRunning) {
                LOG.debug("closing a connection's {} during a setup step: {}", what, x.getMessage());
            } else {
                LOG.warn("verbs4j: closing a connection's {} failed: {}", what, x.getMessage());
            }
        }
    }

    /**
     * Runs {@code action} under the id's lock, unless the connection was closed; waits for the
     * lock no longer than the connect's or accept's deadline.
     */
    void locked(String verb, Runnable action) {
        lockId(verb);
        try {
            synchronized (lock) {
                if (closed) {
                    throw failureException("calling " + verb);
                }
            }
            action.run();
        } finally {
            idLock.unlock();
        }
    }

    /** Takes the id's lock, within the deadline of the connect or accept (its {@link SetupFuture}). */
    private void lockId(String verb) {
        SetupFuture f = setupFuture;
        if (f == null) {
            idLock.lock();
            return;
        }
        long deadline = f.deadline;
        long t0 = SetupTimings.start();
        try {
            if (idLock.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                SetupTimings.done("id lock wait", t0);
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new VerbsException(
                    setupVerb(), Errno.EINTR, "interrupted before calling " + verb, "do not interrupt a setup", e);
        }
        throw new VerbsTimeoutException(
                setupVerb(),
                "the timeout ran out before " + verb + " could be called (state " + state
                        + "; another call on this connection's cm id held it: its close, or the handling of"
                        + " its event)",
                "allow more time; do not close a connection that is still being set up");
    }

    static void checkPrivateData(String verb, byte[] data, int max) {
        if (data != null && data.length > max) {
            throw new InvalidRequestException(
                    verb,
                    "private data of " + data.length + " bytes; at most " + max + " fit in this message",
                    "send less, or send the rest once connected");
        }
    }

    @Override
    public String toString() {
        return "RdmaConnection(" + (active ? "to " : "from ") + peer + ", " + state + ")";
    }
}
