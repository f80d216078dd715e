package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.verbs4j.Access;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionOpcode;
import org.verbs4j.CompletionQueue;
import org.verbs4j.CompletionStatus;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.VerbsException;
import org.verbs4j.WorkCompletions;
import org.verbs4j.cm.ConnectionSetup;

/**
 * One connection's byte stream over SEND/RECV: its completion queue, its receive buffers (one
 * registered region of {@code receiveBuffers × bufferSize}, each buffer posted once and reposted
 * when its bytes were handed up), its send buffers (a second region, used as a ring: outgoing
 * bytes are copied in, each SEND_WITH_IMM carries one buffer and the credits returned), and its
 * {@link Credits}. The queue pair grants the peer no remote access: the peer can only fill the
 * receive buffers posted here, never other memory. With zero-copy reads a frame may instead be
 * handed up in its receive buffer ({@link #takeInPlace}), which is reposted when that buffer is
 * released ({@link #returned}); the receive memory then lives in an automatic arena, so that a
 * buffer released (or read) after the connection closed never meets freed memory.
 *
 * <p>Two receive buffers more than the credits granted are posted, for the peer's probes and
 * its answers to this side's probes (empty frames flagged {@link ReceivedFrames#PROBE} and
 * {@link ReceivedFrames#PROBE_ACK}; they cost no credit and are reposted at once). A side whose
 * writes wait for credits with no send in flight probes the peer ({@link #postProbe}); the peer
 * answers each probe, and the next probe goes only after the answer (or, for a peer that has not
 * answered for {@link #ACK_WAIT_PROBES} probe intervals, without it), so a probe never finds its
 * receive buffer taken. A peer that died while holding every credit is found out (the probe ends
 * in a transport retry error) instead of being waited for forever.
 *
 * <p>With a shared receive queue ({@link SharedReceives}) the stream posts no receive of its own:
 * its queue pair takes the loop's buffers, its {@code receiveBuffers} credits (and the two probe
 * buffers) are reserved from that pool, and its receive completions reach it through the pool
 * ({@link #arrivedShared}); a peer that sends more frames than it was granted credits would take
 * buffers reserved for other connections, so it is found out ({@link Credits#frameArrived}) and
 * the connection closed. Only the send completions come to {@link #cq}. A frame handed up in
 * place holds its buffer of the loop's queue ({@link SharedReceives#hold}); released while the
 * connection is up, it is reposted and its credit owed to the peer, as a buffer of its own would
 * be; released after, it goes back to the loop's queue ({@link #returnedAfterClose}). Its copied
 * frames go from the loop's shared send buffers ({@link SharedSends}): one is taken when bytes are
 * to be copied and given back when that frame's send completed, or at {@link #release()}.
 *
 * <p>Made on a connecting thread (the memory is registered and the receives posted before the
 * connection request or the accept goes out); from then on used by the channel's event loop
 * thread only. {@link #release()} after the queue pair is gone.
 */
final class RdmaStream implements OutboundFrames.Frames {
    static final long SEND_TAG = 1L << 32;
    /** The work request ids of a probe and of an answer to the peer's probe (no send buffer, no credit). */
    static final long PROBE_ID = 2L << 32, PROBE_ACK_ID = 3L << 32;
    /** Receive buffers posted beyond the credits: one for the peer's probe, one for its answer to ours. */
    static final int SPARE_RECEIVES = 2;
    /** Probe intervals without the peer's answer after which the next probe goes anyway. */
    static final int ACK_WAIT_PROBES = 30;

    final int bufferSize, receiveBuffers, sendBuffers;
    /** Bytes of each receive buffer: the largest frame the peer may send (its handshake's buffer size). */
    final int recvSize;

    final CompletionQueue cq;
    /** The loop's shared receive queue, or null: the stream posts receives of its own. */
    final SharedReceives shared;
    /** The loop's reservation this stream holds (given back by {@link #release}). */
    private final RdmaIoHandler loop;

    private int qpn;
    // shared receives: frames that arrived before the connection was handed to the loop
    private final int[] early;
    private int earlyCount;
    private IOException sharedFailure;
    private RdmaIoHandle handle;
    // the loop's shared send buffers (or null: the send ring's own region); the buffer each posted
    // slot's frame was copied into (-1: none), and the one taken for the frame being copied
    private SharedSends sendPool;
    private SharedSends.Account account;
    private final int[] sendBuf;
    private int staged = -1;
    private boolean notified;
    private MemoryRegion recvMr, sendMr;
    private ByteBuf recvView, sendView;
    private ByteBuffer recvBytes;
    private QueuePair qp;
    private final ProtectionDomain ownPd;
    private ProtectionDomain pd;
    private final ReceiveWorkRequests recvs;
    private final SendWorkRequests sends;
    private final WorkCompletions wcs;
    private Credits credits;
    private int peerBufferSize;

    // the send ring: slots [sendTail, sendHead) are posted; sendLength[slot] bytes of stream data each
    private final int[] sendLength;
    // the registered buffer each posted slot's frame was sent from in place, held until it completes
    private final RegisteredByteBuf[] pinned;
    private long sendHead, sendTail;
    private final ReceivedFrames ready;
    private long posted;
    private boolean released, down, endSent, probing, answering;
    // the setup failed: start() refuses (guarded by this)
    private boolean abandoned;
    static final long RELEASE_POLL_MS = 20, RELEASE_WAIT_S = 120;
    private long probeSentAt;
    // zero-copy reads: frames handed up in their receive buffers and not released yet, at most maxHeld
    // (with a shared queue guarded by its lock: a buffer may come back on any thread once closed)
    private boolean zeroCopyReads, heldOrphaned;
    private int held;
    private final int maxHeld;

    /** Results of the last {@link #poll}: stream bytes whose sends completed. */
    long completedBytes;

    /**
     * Creates the queue and registers nothing yet (see {@link #start}); {@code pd}: the protection
     * domain of the connection (the channel allocator's, {@link RdmaByteBufAllocator}), or null for the library's.
     */
    RdmaStream(
            Context ctx,
            CompletionChannel channel,
            int bufferSize,
            int receiveBuffers,
            int sendBuffers,
            ProtectionDomain pd,
            SharedReceives shared,
            RdmaIoHandler loop) {
        this.bufferSize = bufferSize;
        this.receiveBuffers = receiveBuffers;
        this.sendBuffers = sendBuffers;
        this.shared = shared;
        this.loop = loop;
        this.recvSize = shared != null ? shared.bufferSize : bufferSize;
        this.early = shared != null ? new int[3 * (receiveBuffers + SPARE_RECEIVES)] : null;
        this.cq = ctx.createCompletionQueue(
                (shared != null ? 0 : receiveBuffers) + sendBuffers + 2 * SPARE_RECEIVES, channel, 0);
        this.recvs = new ReceiveWorkRequests(1, 1);
        this.sends = new SendWorkRequests(1, 1);
        this.wcs = new WorkCompletions(32);
        this.sendLength = new int[sendBuffers];
        this.pinned = new RegisteredByteBuf[sendBuffers];
        this.sendBuf = new int[sendBuffers];
        java.util.Arrays.fill(sendBuf, -1);
        this.ownPd = pd;
        this.ready = new ReceivedFrames(receiveBuffers + SPARE_RECEIVES);
        this.maxHeld = Credits.maxHeld(receiveBuffers);
    }

    /**
     * Copies frames into the loop's shared send buffers ({@code pool}, this stream's share
     * {@code account}) instead of a region of its own; before {@link #setup()}. Null: its own.
     */
    void sharedSends(SharedSends pool, SharedSends.Account account) {
        this.sendPool = pool;
        this.account = account;
        if (account != null) {
            account.wake = this::sendBufferFree;
        }
    }

    /** Loop thread: the loop's shared send pool may have a buffer for the writes that waited on it. */
    private void sendBufferFree() {
        if (!released && handle != null) {
            handle.completionsReady(false); // reaps, then resumes the flush
        }
    }

    /** Hands frames up in their receive buffers ({@link RdmaChannelOption#ZERO_COPY_READS}); before {@link #setup()}. */
    void zeroCopyReads(boolean on) {
        this.zeroCopyReads = on;
    }

    /** The queue pair shape this stream needs. */
    ConnectionSetup setup() {
        ConnectionSetup setup = new ConnectionSetup();
        if (shared != null) {
            return setup.protectionDomain(shared.pd)
                    .completionQueues(cq, shared.cq)
                    .sharedReceiveQueue(shared.srq)
                    .maxSendWr(sendBuffers + SPARE_RECEIVES)
                    .beforeConnect(c -> start(c.protectionDomain(), c.queuePair()));
        }
        if (ownPd != null) {
            setup.protectionDomain(ownPd);
        }
        return setup.completionQueues(cq, cq)
                .maxRecvWr(receiveBuffers + SPARE_RECEIVES)
                .maxSendWr(sendBuffers + SPARE_RECEIVES)
                .beforeConnect(c -> start(c.protectionDomain(), c.queuePair()));
    }

    /**
     * Registers the buffers and posts every receive (the queue pair exists, nothing is connected yet);
     * refused once the setup was given up ({@link #releaseWhenQueuePairGone}).
     */
    private synchronized void start(ProtectionDomain pd, QueuePair qp) {
        if (abandoned) {
            throw new IllegalStateException("the connection's setup was given up before its receives were posted");
        }
        this.qp = qp;
        this.pd = pd;
        if (shared != null) {
            if (sendPool == null) {
                sendMr = pd.allocateMemoryRegion((long) sendBuffers * bufferSize, Access.LOCAL_WRITE);
                RdmaStats.REGISTERED.addAndGet(sendMr.length());
                sendView = Unpooled.wrappedBuffer(sendMr.segment().asByteBuffer());
            }
            qpn = qp.qpNumber();
            shared.register(qpn, this);
            return;
        }
        long recvLength = (long) (receiveBuffers + SPARE_RECEIVES) * bufferSize;
        recvMr = zeroCopyReads // the buffers handed up keep their memory alive after the region is gone
                ? pd.register(Arena.ofAuto().allocate(recvLength, 4096), Access.LOCAL_WRITE)
                : pd.allocateMemoryRegion(recvLength, Access.LOCAL_WRITE);
        RdmaStats.REGISTERED.addAndGet(recvMr.length());
        sendMr = pd.allocateMemoryRegion((long) sendBuffers * bufferSize, Access.LOCAL_WRITE);
        RdmaStats.REGISTERED.addAndGet(sendMr.length());
        this.recvBytes = recvMr.segment().asByteBuffer();
        recvView = Unpooled.wrappedBuffer(recvBytes);
        sendView = Unpooled.wrappedBuffer(sendMr.segment().asByteBuffer());
        for (int i = 0; i < receiveBuffers + SPARE_RECEIVES; i++) {
            postReceive(i);
        }
    }

    /** The connection is up: {@code peer} is the peer's handshake. */
    void connected(Handshake peer) {
        this.credits = new Credits(peer.receiveBuffers(), receiveBuffers);
        this.peerBufferSize = peer.bufferSize();
        if (shared != null) {
            synchronized (shared) { // frames that came before the loop had the connection
                for (int i = 0; i < earlyCount && sharedFailure == null; i += 3) {
                    receivedShared(early[i], early[i + 1], early[i + 2]);
                }
                earlyCount = 0;
            }
        }
    }

    Handshake handshake() {
        return new Handshake(receiveBuffers, recvSize);
    }

    /** The channel's handle, told when the loop's shared receive queue brought this stream frames. */
    void handle(RdmaIoHandle h) {
        this.handle = h;
    }

    /**
     * A receive completion of this stream's queue pair, reaped from the loop's shared queue (loop
     * thread, the pool's lock held): handled as {@link #complete} handles its own; a failure is
     * kept for the next {@link #poll}.
     *
     * @return whether the channel should be told (the first frame since it was last told)
     */
    boolean arrivedShared(int slot, WorkCompletions wcs, int i) {
        if (sharedFailure != null || released) {
            repostSharedQuietly(slot);
            return false;
        }
        if (!wcs.isSuccess(i)) {
            sharedFailure = new CompletionFailedException(
                    "a receive failed: " + wcs.statusText(i) + " (status " + wcs.status(i) + ")", false);
            repostSharedQuietly(slot);
        } else if (wcs.opcode(i) != CompletionOpcode.RECV || !wcs.hasImmediate(i)) {
            sharedFailure =
                    new ProtocolViolationException("a frame without its credit count (opcode " + wcs.opcode(i) + ")");
            repostSharedQuietly(slot);
        } else if (credits == null) {
            if (earlyCount == early.length) {
                sharedFailure = new ProtocolViolationException("the peer sent more than " + early.length / 3
                        + " frames before the connection was established (it was granted " + receiveBuffers
                        + " credits)");
                repostSharedQuietly(slot);
            } else {
                early[earlyCount++] = slot;
                early[earlyCount++] = wcs.byteLength(i);
                early[earlyCount++] = wcs.immediate(i);
            }
            return false;
        } else {
            receivedShared(slot, wcs.byteLength(i), wcs.immediate(i));
        }
        boolean tell = !notified && handle != null;
        notified |= tell;
        return tell;
    }

    private void receivedShared(int slot, int length, int imm) {
        try {
            received(slot, length, imm);
        } catch (IOException e) {
            sharedFailure = e;
            repostSharedQuietly(slot);
        }
    }

    private void repostSharedQuietly(int slot) {
        try {
            shared.repost(slot);
        } catch (IOException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: {}", e.getMessage());
        }
    }

    /** The loop's shared receive queue brought this stream frames: the channel reaps and delivers them. */
    void sharedReceived() {
        notified = false;
        if (handle != null) {
            handle.completionsReady(false);
        }
    }

    private void postReceive(int slot) {
        qp.postRecv(recvs.clear().add(slot).sge(recvMr, (long) slot * bufferSize, bufferSize));
        posted++;
        RdmaStats.POSTED.incrementAndGet();
    }

    /** Reposts a receive buffer whose bytes were handed up; nothing once the connection is down. */
    private void repost(int slot) throws IOException {
        if (repostQuietly(slot)) {
            credits.reposted(1);
        }
    }

    /** Reposts a receive buffer without owing the peer a credit for it (a probe's); false once down. */
    private boolean repostQuietly(int slot) throws IOException {
        if (shared != null) {
            shared.repost(slot); // the loop's buffer goes back whatever this connection's state
            return !down;
        }
        if (down) {
            return false;
        }
        try {
            postReceive(slot);
        } catch (VerbsException e) {
            down = true;
            throw new IOException(
                    "reposting a receive buffer failed (the connection is down or broken): " + e.getMessage(), e);
        }
        return true;
    }

    /**
     * The connection is ending: what was received may still be handed up, but no receive buffer
     * is reposted and no frame posted (the queue pair is, or is about to be, in the error state).
     */
    void down() {
        down = true;
    }

    /** The largest chunk of stream bytes one frame carries. */
    @Override
    public int chunkSize() {
        return Math.min(sendPool == null ? bufferSize : Math.min(bufferSize, sendPool.bufferSize), peerBufferSize);
    }

    /** Whether a data frame can be posted now (a credit and a free send buffer). */
    @Override
    public boolean canSendData() {
        return !down && sendHead - sendTail < sendBuffers && credits.canSendData();
    }

    /**
     * The registered bytes of the next send buffer, to copy into (at most {@link #chunkSize()}); null
     * when the loop's shared send buffers have none for it now (it is told when they may).
     */
    @Override
    public ByteBuf sendBuffer() {
        if (sendPool == null) {
            return sendView;
        }
        if (staged < 0 && (released || (staged = sendPool.take(account)) < 0)) {
            return null;
        }
        return sendPool.chunk(staged).view();
    }

    /** Where in {@link #sendBuffer()} the next frame goes. */
    @Override
    public int sendOffset() {
        return sendPool == null ? (int) (sendHead % sendBuffers) * bufferSize : sendPool.offset(staged);
    }

    /**
     * Posts the next send buffer with {@code length} stream bytes (0: an explicit credit frame).
     *
     * @throws IOException the queue pair refused it (the connection is down or broken)
     */
    @Override
    public void post(int length) throws IOException {
        if (endSent) {
            throw new IllegalStateException("a frame after this side's end of stream");
        }
        post(length, 0);
    }

    /**
     * Posts the end-of-stream frame (no bytes; it obeys the credit rules of a data frame, see
     * {@link #canSendData()}); after every frame posted before it. No frame but credit frames follows.
     *
     * @throws IOException the queue pair refused it (the connection is down or broken)
     */
    void postEnd() throws IOException {
        post(0, ReceivedFrames.END_OF_STREAM);
        endSent = true;
    }

    private void post(int length, int flags) throws IOException {
        int slot = (int) (sendHead % sendBuffers);
        sends.clear().sendWithImmediate(SEND_TAG | slot, credits.owed() | flags);
        int buf = -1;
        if (length > 0 && sendPool != null) {
            buf = staged;
            sends.sge(sendPool.chunk(buf).region(), sendPool.offset(buf), length);
        } else if (length > 0) {
            sends.sge(sendMr, (long) slot * bufferSize, length);
        }
        send(slot, length, null);
        if (buf >= 0) {
            sendBuf[slot] = buf; // held until the send completed
            staged = -1;
        }
        RdmaStats.COPIED.addAndGet(length);
    }

    /** Whether {@code b} is a buffer of the connection's {@link RdmaByteBufAllocator}, posted from where it lies. */
    @Override
    public boolean postsInPlace(ByteBuf b) {
        return RegisteredByteBuf.inPlace(b, pd) != null;
    }

    /**
     * Posts the next frame with {@code length} bytes of {@code b} from {@code index}, straight from
     * its registered memory; its slot is held until the send completed.
     *
     * @throws IOException the buffer was released before it was sent, or the queue pair refused it
     */
    @Override
    public void postInPlace(ByteBuf b, int index, int length) throws IOException {
        RegisteredByteBuf r = RegisteredByteBuf.inPlace(b, pd);
        if (r == null || !r.pin()) {
            down = true;
            throw new IOException("posting a buffer of RdmaByteBufAllocator failed: it was released (reference count"
                    + " 0) before it was sent; a buffer passed to write belongs to the channel, do not release it");
        }
        int slot = (int) (sendHead % sendBuffers);
        sends.clear()
                .sendWithImmediate(SEND_TAG | slot, credits.owed())
                .sge(r.region(), r.regionOffset() + index, length);
        try {
            send(slot, length, r);
        } catch (IOException e) {
            r.unpin();
            throw e;
        }
        RdmaStats.SENT_IN_PLACE.addAndGet(length);
    }

    private void send(int slot, int length, RegisteredByteBuf pin) throws IOException {
        try {
            qp.postSend(sends.signaled());
        } catch (VerbsException e) {
            down = true;
            throw new IOException(
                    "posting a frame of " + length + " bytes failed (the connection is down or broken): "
                            + e.getMessage(),
                    e);
        }
        credits.spend();
        sendLength[slot] = length;
        pinned[slot] = pin;
        sendHead++;
    }

    /**
     * Whether writes wait for the peer's credits with no send in flight: were the peer gone,
     * nothing but a probe would find out.
     */
    boolean waitingForCredits() {
        return !down && sendHead == sendTail && !credits.canSendData();
    }

    /**
     * Whether a probe may go now: the peer answered the last one, or has not for {@code ackWaitNanos}
     * (its probe buffer is then either reposted, or the peer is stuck or gone and the probe fails).
     */
    boolean probeDue(long now, long ackWaitNanos) {
        return !probing || now - probeSentAt > ackWaitNanos;
    }

    /**
     * Posts a probe: an empty frame flagged {@link ReceivedFrames#PROBE}, into a receive buffer the
     * peer keeps for it; the peer answers it. A peer that is gone fails it with a transport retry
     * error.
     *
     * @throws IOException the queue pair refused it (the connection is down or broken)
     */
    void postProbe() throws IOException {
        postControl(PROBE_ID, ReceivedFrames.PROBE, "a probe of the peer");
        probing = true;
        probeSentAt = System.nanoTime();
    }

    private void postControl(long id, int imm, String what) throws IOException {
        try {
            qp.postSend(sends.clear().sendWithImmediate(id, imm).signaled());
        } catch (VerbsException e) {
            down = true;
            throw new IOException(
                    "posting " + what + " failed (the connection is down or broken): " + e.getMessage(), e);
        }
    }

    /** Sends an empty frame returning the credits owed, if they are due and nothing else carries them. */
    void returnCreditsIfDue() throws IOException {
        if (!down && credits.shouldSendCreditFrame() && sendHead - sendTail < sendBuffers) {
            post(0, 0);
        }
    }

    /** Whether the peer's end of stream arrived and every byte before it was taken. */
    boolean inputEnded() {
        return ready.ended();
    }

    /** Drops every ready frame unread and reposts its buffer (the input was shut down). */
    void discardReady() throws IOException {
        for (int slot; (slot = ready.drop()) >= 0; ) {
            repost(slot);
        }
    }

    /** Data frames received and not handed up yet. */
    int readyFrames() {
        return ready.count();
    }

    /**
     * Copies the next bytes of the oldest ready frame, as many as {@code dst} has room for, into
     * {@code dst}; once the frame is all taken, reposts its buffer and forgets it.
     *
     * @throws IOException the buffer could not be reposted (the connection is down or broken)
     */
    void takeReady(ByteBuf dst) throws IOException {
        int from = dst.writerIndex();
        int slot = shared != null
                ? ready.take(shared.view(ready.headSlot()), recvSize, SharedReceives.CHUNK, dst)
                : ready.take(recvView, bufferSize, Integer.MAX_VALUE, dst);
        RdmaStats.READ_COPIED.addAndGet(dst.writerIndex() - from);
        if (slot >= 0) {
            repost(slot);
        }
    }

    /**
     * With zero-copy reads, the oldest ready frame as a buffer of {@code alloc} over its receive
     * buffer, uncopied (its receive is reposted when the buffer is released: {@code returns}
     * hears of it, then {@link #returned}); null when it must be copied ({@link #takeReady}):
     * the option is off, the frame was partly taken, or {@link Credits#maxHeld} buffers are held.
     */
    ByteBuf takeInPlace(ByteBufAllocator alloc, ReceivedByteBuf.Returns returns) {
        int length;
        if (!zeroCopyReads || held >= maxHeld || (length = ready.wholeHeadLength()) < 0) {
            return null;
        }
        int slot = ready.drop();
        ByteBuffer frame;
        if (shared != null) {
            synchronized (shared) {
                held++;
                frame = shared.hold(slot, length);
            }
        } else {
            held++;
            frame = recvBytes.slice(slot * bufferSize, length);
        }
        RdmaStats.READ_IN_PLACE.addAndGet(length);
        return ReceivedByteBuf.of(alloc, frame, returns, this, slot);
    }

    /**
     * The buffer {@link #takeInPlace} handed up over receive buffer {@code slot} was released:
     * reposts that receive (a credit owed to the peer); nothing once the stream was released.
     *
     * @throws IOException the buffer could not be reposted (the connection is down or broken)
     */
    void returned(int slot) throws IOException {
        if (shared != null) {
            if (!giveBackShared(slot) && !down) {
                credits.reposted(1);
            }
            return;
        }
        if (released) {
            return;
        }
        held--;
        repost(slot);
    }

    /**
     * With a shared queue, once the stream was released: gives the released buffer over
     * {@code slot} back to the loop's queue (any thread); else false (the loop hears of it).
     */
    boolean returnedIfOrphaned(int slot) {
        if (shared == null) {
            return false;
        }
        synchronized (shared) {
            if (!heldOrphaned) {
                return false;
            }
        }
        returnedAfterClose(slot);
        return true;
    }

    /**
     * The buffer {@link #takeInPlace} handed up over receive buffer {@code slot} was released
     * after the channel closed (any thread, the loop perhaps gone): with a shared queue it goes
     * back to the loop's queue, no credit owed; with buffers of its own nothing is reposted.
     */
    void returnedAfterClose(int slot) {
        if (shared == null) {
            return;
        }
        try {
            giveBackShared(slot);
        } catch (IOException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: {}", e.getMessage());
        }
    }

    /**
     * Gives the buffer over {@code slot} back to the loop's shared queue (reposted while it is open);
     * whether it was orphaned (held after this stream was released, so no longer counted here).
     */
    private boolean giveBackShared(int slot) throws IOException {
        synchronized (shared) {
            boolean orphaned = heldOrphaned;
            if (!orphaned) {
                held--;
            }
            shared.giveBack(slot, orphaned);
            return orphaned;
        }
    }

    /**
     * Reaps every completion now in the queue: receives become ready frames (empty ones only
     * return credits), completed sends free their buffers ({@link #completedBytes}). Then re-arms
     * the queue's notification and reaps again, so that nothing arriving meanwhile is missed when
     * {@code arm}.
     *
     * @throws IOException a failed completion, or a protocol violation by the peer
     */
    void poll(boolean arm) throws IOException {
        completedBytes = 0;
        try {
            drain();
            if (arm) {
                cq.requestNotify(false);
                drain();
            }
            if (sharedFailure != null) {
                throw sharedFailure;
            }
        } catch (VerbsException e) {
            down = true;
            throw new IOException("reaping the connection's completions failed: " + e.getMessage(), e);
        } catch (IOException e) {
            down = true; // a failed completion or a protocol violation: the connection is ending
            throw e;
        }
    }

    private void drain() throws IOException {
        int n;
        while ((n = cq.poll(wcs)) > 0) {
            for (int i = 0; i < n; i++) {
                complete(i);
            }
        }
    }

    private void complete(int i) throws IOException {
        long id = wcs.wrId(i);
        if (id == PROBE_ID || id == PROBE_ACK_ID) {
            answering &= id != PROBE_ACK_ID;
            if (!wcs.isSuccess(i) && !(down && wcs.status(i) == CompletionStatus.WR_FLUSH_ERR)) {
                throw new CompletionFailedException(
                        (id == PROBE_ID
                                        ? "a probe of the peer (sent while writes waited for its credits)"
                                        : "an answer to the peer's probe")
                                + " failed: " + wcs.statusText(i) + " (status " + wcs.status(i) + ")",
                        wcs.status(i) == CompletionStatus.WR_FLUSH_ERR);
            }
            return;
        }
        if (!wcs.isSuccess(i)) {
            if ((id & SEND_TAG) == 0) {
                posted--;
                RdmaStats.POSTED.decrementAndGet();
            } else {
                unpin((int) (sendTail % sendBuffers)); // the device is done with it
                sendTail++; // its bytes did not arrive: the channel fails or already failed its writes
            }
            if (down && wcs.status(i) == CompletionStatus.WR_FLUSH_ERR) {
                return; // the connection is known to be ending: the flush is its consequence
            }
            throw new CompletionFailedException(
                    ((id & SEND_TAG) != 0 ? "a send" : "a receive") + " failed: " + wcs.statusText(i) + " (status "
                            + wcs.status(i) + ")"
                            + (wcs.status(i) == CompletionStatus.WR_FLUSH_ERR ? ": the connection is down" : ""),
                    wcs.status(i) == CompletionStatus.WR_FLUSH_ERR);
        }
        if ((id & SEND_TAG) != 0) {
            int slot = (int) (sendTail % sendBuffers);
            completedBytes += sendLength[slot];
            unpin(slot);
            sendTail++;
            return;
        }
        int slot = (int) id;
        posted--;
        RdmaStats.POSTED.decrementAndGet();
        if (wcs.opcode(i) != CompletionOpcode.RECV || !wcs.hasImmediate(i)) {
            throw new ProtocolViolationException("a frame without its credit count (opcode " + wcs.opcode(i) + ")");
        }
        received(slot, wcs.byteLength(i), wcs.immediate(i));
    }

    /** A frame arrived in receive buffer {@code slot}: a probe, or a frame that spent one of the peer's credits. */
    private void received(int slot, int length, int imm) throws IOException {
        if ((imm & ReceivedFrames.PROBE) != 0) {
            probed(slot, imm, length);
            return;
        }
        credits.frameArrived();
        credits.returned(ReceivedFrames.credits(imm));
        if (ready.arrived(slot, length, imm)) {
            repost(slot);
        }
    }

    /** The peer's probe, or its answer to this side's, arrived in receive buffer {@code slot}. */
    private void probed(int slot, int imm, int length) throws IOException {
        if ((imm != ReceivedFrames.PROBE && imm != ReceivedFrames.PROBE_ACK) || length != 0) {
            throw new ProtocolViolationException("a probe frame with " + length + " bytes and immediate 0x"
                    + Integer.toHexString(imm) + " (a probe or its answer carries no bytes, no credits and no end of"
                    + " stream)");
        }
        if (!repostQuietly(slot)) {
            return;
        }
        if (imm == ReceivedFrames.PROBE_ACK) {
            probing = false; // the next probe may go: the peer reposted this one's buffer before it answered
        } else if (!answering) { // else the peer probed again before the answer arrived: it gets this one
            postControl(PROBE_ACK_ID, ReceivedFrames.PROBE_ACK, "an answer to the peer's probe");
            answering = true;
        }
    }

    /** A work request of the connection completed with an error status. */
    static final class CompletionFailedException extends IOException {
        private static final long serialVersionUID = 1L;
        /** Flushed (WR_FLUSH_ERR): the queue pair left the ready state, nothing wrong with the work. */
        final boolean flushed;

        CompletionFailedException(String message, boolean flushed) {
            super(message);
            this.flushed = flushed;
        }
    }

    /** Send slot {@code slot}'s frame is done with: its registered buffer unpinned, its shared send buffer given back. */
    private void unpin(int slot) {
        RegisteredByteBuf b = pinned[slot];
        if (b != null) {
            pinned[slot] = null;
            b.unpin();
        }
        int buf = sendBuf[slot];
        if (buf >= 0) {
            sendBuf[slot] = -1;
            sendPool.give(account, buf);
        }
    }

    /** Whether every posted send has completed. */
    boolean sendsIdle() {
        return sendHead == sendTail;
    }

    /**
     * {@link #release()} for a connect or accept that failed: the connection manager closes that
     * connection's queue pair in the background, perhaps with receives still posted in these
     * buffers, so they are released only once it is gone: at once when there never was one (a
     * setup step that would post them later is refused), else when it has closed (looked at every
     * {@value #RELEASE_POLL_MS} ms, for at most {@value #RELEASE_WAIT_S} s; past that the buffers
     * stay registered and a warning says so: a leak, never memory freed under the device).
     */
    void releaseWhenQueuePairGone() {
        QueuePair q;
        synchronized (this) {
            abandoned = true;
            q = qp;
        }
        releaseWhenClosed(q, System.nanoTime() + TimeUnit.SECONDS.toNanos(RELEASE_WAIT_S));
    }

    private void releaseWhenClosed(QueuePair q, long deadline) {
        if (q == null || !q.isOpen()) {
            release();
        } else if (System.nanoTime() - deadline > 0) {
            RdmaIoHandler.LOG.warn(
                    "verbs4j-netty: {} of a failed connection is still open after {} s: its buffers stay registered",
                    q,
                    RELEASE_WAIT_S);
        } else {
            CompletableFuture.delayedExecutor(RELEASE_POLL_MS, TimeUnit.MILLISECONDS)
                    .execute(() -> releaseWhenClosed(q, deadline));
        }
    }

    /**
     * Deregisters the buffers and destroys the queue; after the queue pair was destroyed (so the
     * device no longer touches them). Idempotent.
     */
    void release() {
        if (released) {
            return;
        }
        released = true;
        down = true;
        RdmaStats.POSTED.addAndGet(-posted);
        posted = 0;
        if (shared != null) {
            synchronized (shared) { // once unregistered under the pool's lock, no completion reaches this stream
                shared.unregister(qpn);
                for (int slot; (slot = ready.drop()) >= 0; ) {
                    repostSharedQuietly(slot); // the frames not handed up give their buffers back to the loop
                }
                for (int i = 0; i < earlyCount; i += 3) {
                    repostSharedQuietly(early[i]);
                }
                earlyCount = 0;
                shared.orphan(held); // the buffers still held in place stay reserved until released
                heldOrphaned = true;
            }
        }
        for (int slot = 0; slot < sendBuffers; slot++) {
            unpin(slot); // the queue pair is gone: no send reads them any more
        }
        if (account != null) {
            if (staged >= 0) {
                sendPool.give(account, staged); // taken, never posted
                staged = -1;
            }
            sendPool.leave(account);
        }
        closeQuietly(recvMr);
        closeQuietly(sendMr);
        try {
            cq.close();
        } catch (RuntimeException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: closing a connection's completion queue failed: {}", e.toString());
        }
        recvs.close();
        sends.close();
        wcs.close();
        loop.unreserve(this); // last: the loop's shared queue and channel may go with it
    }

    private static void closeQuietly(MemoryRegion mr) {
        if (mr == null) {
            return;
        }
        RdmaStats.REGISTERED.addAndGet(-mr.length());
        try {
            mr.close();
        } catch (RuntimeException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: deregistering a connection's buffers failed: {}", e.toString());
        }
    }
}
