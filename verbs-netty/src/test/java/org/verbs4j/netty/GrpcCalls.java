package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ServerCallStreamObserver;
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
 * {@link SimpleServiceGrpc}, messages from 1 B to 4 MiB, a deadline, a cancellation, and 1,000 calls
 * with every response checked. Server and client run on separate event loop groups, so each call
 * crosses the transport between two groups as it would between two processes.
 */
@OverTransport(inTier = false)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GrpcOverTransportTest {
    private static final int MAX_MESSAGE = 8 << 20;
    private static final long WAIT_S = 60;
    /** The request that the server never answers: only the client's deadline or cancellation ends it. */
    private static final String HANG = "hang";

    private final TestTransport transport = TestTransport.current();
    private final CompletableFuture<Status> hangEnded = new CompletableFuture<>();
    /** The server's view of a bidi stream the client cancelled. */
    private final CompletableFuture<Status> bidiEnded = new CompletableFuture<>();

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;
    private Server server;
    private ManagedChannel channel;
    private SimpleServiceGrpc.SimpleServiceStub async;

    @BeforeAll
    void start() throws Exception {
        serverGroup = transport.newGroup(1, "grpc-server");
        clientGroup = transport.newGroup(1, "grpc-client");
        server = NettyServerBuilder.forAddress(transport.address(0))
                .channelType(transport.serverChannelClass())
                .bossEventLoopGroup(serverGroup)
                .workerEventLoopGroup(serverGroup)
                .maxInboundMessageSize(MAX_MESSAGE)
                .addService(new EchoService())
                .build()
                .start();
        InetSocketAddress at = new InetSocketAddress(transport.address(0).getAddress(), server.getPort());
        channel = NettyChannelBuilder.forAddress(at)
                .channelType(transport.channelClass())
                .eventLoopGroup(clientGroup)
                .usePlaintext()
                .maxInboundMessageSize(MAX_MESSAGE)
                .build();
        async = SimpleServiceGrpc.newStub(channel);
    }

    @AfterAll
    void stop() throws InterruptedException {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(WAIT_S, TimeUnit.SECONDS);
        }
        if (server != null) {
            server.shutdownNow().awaitTermination(WAIT_S, TimeUnit.SECONDS);
        }
        for (EventLoopGroup g : new EventLoopGroup[] {clientGroup, serverGroup}) {
            if (g != null) {
                g.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
            }
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
                        .unaryRpc(request(HANG)));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode(), e.toString());
        assertEquals(
                Status.Code.CANCELLED, hangEnded.get(WAIT_S, TimeUnit.SECONDS).getCode(), "the server side");
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
        assertEquals(
                Status.Code.CANCELLED, bidiEnded.get(WAIT_S, TimeUnit.SECONDS).getCode(), "the server side");
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
        CompletableFuture.allOf(checks.toArray(CompletableFuture[]::new)).get(WAIT_S * 4, TimeUnit.SECONDS);
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

    /** Echoes: unary and bidi message for message, server streaming in {@link #COPIES} numbered copies, client streaming as a digest. */
    private final class EchoService extends SimpleServiceGrpc.SimpleServiceImplBase {
        static final int COPIES = 5;

        @Override
        public void unaryRpc(SimpleRequest req, StreamObserver<SimpleResponse> out) {
            if (HANG.equals(req.getRequestMessage())) {
                ServerCallStreamObserver<SimpleResponse> call = (ServerCallStreamObserver<SimpleResponse>) out;
                call.setOnCancelHandler(() -> hangEnded.complete(Status.CANCELLED));
                return;
            }
            out.onNext(response(req.getRequestMessage()));
            out.onCompleted();
        }

        @Override
        public void serverStreamingRpc(SimpleRequest req, StreamObserver<SimpleResponse> out) {
            for (int i = 0; i < COPIES; i++) {
                out.onNext(response(i + ":" + req.getRequestMessage()));
            }
            out.onCompleted();
        }

        @Override
        public StreamObserver<SimpleRequest> clientStreamingRpc(StreamObserver<SimpleResponse> out) {
            StringBuilder all = new StringBuilder();
            return new StreamObserver<>() {
                @Override
                public void onNext(SimpleRequest value) {
                    all.append(value.getRequestMessage());
                }

                @Override
                public void onError(Throwable t) {}

                @Override
                public void onCompleted() {
                    out.onNext(response(digest(all)));
                    out.onCompleted();
                }
            };
        }

        @Override
        public StreamObserver<SimpleRequest> bidiStreamingRpc(StreamObserver<SimpleResponse> out) {
            return new StreamObserver<>() {
                @Override
                public void onNext(SimpleRequest value) {
                    out.onNext(response(value.getRequestMessage()));
                }

                @Override
                public void onError(Throwable t) {
                    bidiEnded.complete(Status.fromThrowable(t));
                }

                @Override
                public void onCompleted() {
                    out.onCompleted();
                }
            };
        }

        static String digest(CharSequence all) {
            try {
                byte[] d = java.security.MessageDigest.getInstance("SHA-256")
                        .digest(all.toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                return all.length() + ":" + java.util.HexFormat.of().formatHex(d);
            } catch (java.security.NoSuchAlgorithmException e) {
                throw new AssertionError(e);
            }
        }

        private static SimpleResponse response(String m) {
            return SimpleResponse.newBuilder().setResponseMessage(m).build();
        }
    }
}
