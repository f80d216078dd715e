package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.channel.EventLoopGroup;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * gRPC-java over the transport under test, plugged in as the epoll transport is: the server's
 * channel type and event loop groups, the client's channel type and group. The four call shapes of
 * {@link SimpleServiceGrpc} served by {@link EchoService}, messages from 1 B to 4 MiB, a deadline, a
 * cancellation seen by the server, and 1,000 calls with every response checked. The client runs in
 * this JVM on its own event loop group; a subclass starts the server (in this JVM or another) and
 * relays what the server saw of the calls the client ended.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class GrpcCalls {
    /**
     * The bound on each call and wait, in seconds: generous, as the emulated guest on a loaded host
     * runs a thousand calls in minutes.
     */
    static final int WAIT_S = 120;

    final TestTransport transport = TestTransport.current();

    private EventLoopGroup clientGroup;
    private ManagedChannel channel;
    private SimpleServiceGrpc.SimpleServiceStub async;

    /** Starts an {@link EchoService} server over {@link #transport}; returns its address. */
    abstract InetSocketAddress startServer() throws Exception;

    /** Stops the server, after the client's channel has ended. */
    abstract void stopServer() throws Exception;

    /**
     * Waits at most {@link #WAIT_S} s for the server's report of the end of {@code call} (see
     * {@link EchoService}) and returns the status code it saw.
     */
    abstract String serverSawEnd(String call) throws Exception;

    @BeforeAll
    void start() throws Exception {
        InetSocketAddress at = startServer();
        clientGroup = transport.newGroup(1, "grpc-client");
        channel = NettyChannelBuilder.forAddress(at)
                .channelType(transport.channelClass())
                .eventLoopGroup(clientGroup)
                .usePlaintext()
                .maxInboundMessageSize(EchoService.MAX_MESSAGE)
                .build();
        async = SimpleServiceGrpc.newStub(channel);
    }

    @AfterAll
    void stop() throws Exception {
        try {
            if (channel != null) {
                channel.shutdownNow().awaitTermination(WAIT_S, TimeUnit.SECONDS);
            }
            if (clientGroup != null) {
                clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
            }
        } finally {
            stopServer();
        }
    }

    @Test
    void unaryEchoesEverySizeFromOneByteToFourMebibytes() {
        for (int size : new int[] {1, 100, 4 << 10, 64 << 10, 1 << 20, 4 << 20}) {
            String m = payload(size, size);
            assertEquals(m, blocking().unaryRpc(request(m)).getResponseMessage(), "unary echo of " + size + " B");
        }
    }

    @Test
    void serverStreamingSendsEveryCopyInOrder() {
        String m = payload(64 << 10, 1);
        List<String> got = new ArrayList<>();
        blocking().serverStreamingRpc(request(m)).forEachRemaining(r -> got.add(r.getResponseMessage()));
        assertEquals(EchoService.COPIES, got.size(), "server-streamed responses");
        for (int i = 0; i < got.size(); i++) {
            assertEquals(i + ":" + m, got.get(i), "server-streamed response " + i);
        }
    }

    @Test
    void clientStreamingSeesEveryMessageInOrder() throws Exception {
        CompletableFuture<SimpleResponse> done = new CompletableFuture<>();
        StreamObserver<SimpleRequest> out =
                async.withDeadlineAfter(WAIT_S, TimeUnit.SECONDS).clientStreamingRpc(observer(done));
        StringBuilder all = new StringBuilder();
        for (int size : new int[] {1, 1000, 64 << 10, 4 << 20, 7}) {
            String m = payload(size, size + 1);
            all.append(m);
            out.onNext(request(m));
        }
        out.onCompleted();
        assertEquals(EchoService.digest(all), done.get(WAIT_S, TimeUnit.SECONDS).getResponseMessage());
    }

    @Test
    void bidiEchoesEachMessageAsItComes() throws Exception {
        BlockingQueue<Object> in = new ArrayBlockingQueue<>(16);
        StreamObserver<SimpleRequest> out =
                async.withDeadlineAfter(WAIT_S, TimeUnit.SECONDS).bidiStreamingRpc(queueing(in));
        for (int size : new int[] {1, 4 << 10, 1 << 20, 4 << 20, 3}) {
            String m = payload(size, size + 2);
            out.onNext(request(m));
            assertEquals(m, take(in), "bidi echo of " + size + " B");
        }
        out.onCompleted();
        assertEquals(Completed.INSTANCE, take(in), "the server's end of the bidi stream");
    }

    @Test
    void aDeadlineEndsACallTheServerNeverAnswers() throws Exception {
        StatusRuntimeException e = assertThrows(
                StatusRuntimeException.class,
                () -> SimpleServiceGrpc.newBlockingStub(channel)
                        .withDeadlineAfter(200, TimeUnit.MILLISECONDS)
                        .unaryRpc(request(EchoService.HANG)));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode(), e.toString());
        assertEquals(Status.Code.CANCELLED.name(), serverSawEnd(EchoService.HANG), "the server side");
        assertEquals("after", blocking().unaryRpc(request("after")).getResponseMessage(), "the channel still serves");
    }

    @Test
    void aCancelledBidiStreamEndsOnBothSides() throws Exception {
        BlockingQueue<Object> in = new ArrayBlockingQueue<>(16);
        ClientCallStreamObserver<SimpleRequest> out = (ClientCallStreamObserver<SimpleRequest>)
                async.withDeadlineAfter(WAIT_S, TimeUnit.SECONDS).bidiStreamingRpc(queueing(in));
        out.onNext(request("first"));
        assertEquals("first", take(in));
        out.cancel("the test cancels", null);
        Object end = take(in);
        assertTrue(
                end instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.CANCELLED,
                "the client's stream ends cancelled: " + end);
        assertEquals(Status.Code.CANCELLED.name(), serverSawEnd("bidi"), "the server side");
        assertEquals("after", blocking().unaryRpc(request("after")).getResponseMessage(), "the channel still serves");
    }

    @Test
    void aThousandCallsEveryResponseChecked() throws Exception {
        int calls = 1000;
        Semaphore inFlight = new Semaphore(32);
        List<CompletableFuture<Void>> checks = new ArrayList<>(calls);
        Random sizes = new Random(46);
        for (int i = 0; i < calls; i++) {
            int size = 1 + sizes.nextInt(i % 100 == 0 ? 1 << 20 : 16 << 10);
            String m = i + ":" + payload(size, i);
            CompletableFuture<SimpleResponse> r = new CompletableFuture<>();
            inFlight.acquire();
            async.withDeadlineAfter(WAIT_S, TimeUnit.SECONDS).unaryRpc(request(m), observer(r));
            int call = i;
            checks.add(r.whenComplete((x, t) -> inFlight.release()).thenAccept(x -> {
                if (!m.equals(x.getResponseMessage())) {
                    throw new AssertionError("call " + call + ": the response is not the request's echo");
                }
            }));
        }
        CompletableFuture.allOf(checks.toArray(CompletableFuture[]::new)).get(WAIT_S * 10, TimeUnit.SECONDS);
        for (CompletableFuture<Void> c : checks) {
            c.get();
        }
    }

    /** A blocking stub whose deadline starts now (a deadline is a point in time, fixed when it is set). */
    private SimpleServiceGrpc.SimpleServiceBlockingStub blocking() {
        return SimpleServiceGrpc.newBlockingStub(channel).withDeadlineAfter(WAIT_S, TimeUnit.SECONDS);
    }

    private static SimpleRequest request(String m) {
        return SimpleRequest.newBuilder().setRequestMessage(m).build();
    }

    /** {@code size} printable ASCII characters (one byte each on the wire), a function of {@code seed}. */
    private static String payload(int size, long seed) {
        Random r = new Random(seed);
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) ('!' + r.nextInt(94));
        }
        return new String(b, java.nio.charset.StandardCharsets.US_ASCII);
    }

    private static StreamObserver<SimpleResponse> observer(CompletableFuture<SimpleResponse> f) {
        return new StreamObserver<>() {
            @Override
            public void onNext(SimpleResponse value) {
                f.complete(value);
            }

            @Override
            public void onError(Throwable t) {
                f.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                f.completeExceptionally(new AssertionError("completed without a response"));
            }
        };
    }

    private enum Completed {
        INSTANCE
    }

    /** Puts each response's message, then the error or {@link Completed}, on {@code in}. */
    private static StreamObserver<SimpleResponse> queueing(BlockingQueue<Object> in) {
        return new StreamObserver<>() {
            @Override
            public void onNext(SimpleResponse value) {
                in.add(value.getResponseMessage());
            }

            @Override
            public void onError(Throwable t) {
                in.add(t);
            }

            @Override
            public void onCompleted() {
                in.add(Completed.INSTANCE);
            }
        };
    }

    private static Object take(BlockingQueue<Object> in) throws InterruptedException {
        Object o = in.poll(WAIT_S, TimeUnit.SECONDS);
        assertTrue(o != null, "nothing within " + WAIT_S + " s");
        return o;
    }
}
