package org.verbs4j.netty;

import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.channel.EventLoopGroup;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The service of the gRPC tests: unary and bidi echo message for message, server streaming in
 * {@link #COPIES} numbered copies, client streaming answered with a {@link #digest}. The unary
 * request {@link #HANG} is never answered. The ends of calls the server did not finish itself are
 * reported to {@code ends} as {@code "<call> <status code>"}: {@code "hang CANCELLED"} when the
 * client gives up the unanswered call, {@code "bidi CANCELLED"} when it cancels a bidi stream.
 */
final class EchoService extends SimpleServiceGrpc.SimpleServiceImplBase {
    /** The copies of a server-streamed response. */
    static final int COPIES = 5;
    /** The largest message either side accepts. */
    static final int MAX_MESSAGE = 8 << 20;
    /** The unary request the server never answers: only the client's deadline or cancellation ends it. */
    static final String HANG = "hang";

    private final Consumer<String> ends;
    private final AtomicLong calls = new AtomicLong();

    /** A service that reports the ends of calls it did not finish itself to {@code ends}. */
    EchoService(Consumer<String> ends) {
        this.ends = ends;
    }

    /**
     * A started server of this service over {@code transport}, on an ephemeral port of the test
     * address, with {@code group} as its boss and worker group.
     */
    Server serve(TestTransport transport, EventLoopGroup group) throws IOException {
        return NettyServerBuilder.forAddress(transport.address(0))
                .channelType(transport.serverChannelClass())
                .bossEventLoopGroup(group)
                .workerEventLoopGroup(group)
                .maxInboundMessageSize(MAX_MESSAGE)
                .addService(this)
                .build()
                .start();
    }

    /** The calls this service has begun. */
    long calls() {
        return calls.get();
    }

    @Override
    public void unaryRpc(SimpleRequest req, StreamObserver<SimpleResponse> out) {
        calls.incrementAndGet();
        if (HANG.equals(req.getRequestMessage())) {
            ServerCallStreamObserver<SimpleResponse> call = (ServerCallStreamObserver<SimpleResponse>) out;
            call.setOnCancelHandler(() -> ends.accept("hang " + Status.Code.CANCELLED));
            return;
        }
        out.onNext(response(req.getRequestMessage()));
        out.onCompleted();
    }

    @Override
    public void serverStreamingRpc(SimpleRequest req, StreamObserver<SimpleResponse> out) {
        calls.incrementAndGet();
        for (int i = 0; i < COPIES; i++) {
            out.onNext(response(i + ":" + req.getRequestMessage()));
        }
        out.onCompleted();
    }

    @Override
    public StreamObserver<SimpleRequest> clientStreamingRpc(StreamObserver<SimpleResponse> out) {
        calls.incrementAndGet();
        StringBuilder all = new StringBuilder();
        return new StreamObserver<>() {
            @Override
            public void onNext(SimpleRequest value) {
                all.append(value.getRequestMessage());
            }

            @Override
            public void onError(Throwable t) {
                ends.accept("clientStreaming " + Status.fromThrowable(t).getCode());
            }

            @Override
            public void onCompleted() {
                out.onNext(response(digest(all)));
                out.onCompleted();
            }
        };
    }

    @Override
    public StreamObserver<SimpleRequest> bidiStreamingRpc(StreamObserver<SimpleResponse> out) {
        calls.incrementAndGet();
        return new StreamObserver<>() {
            @Override
            public void onNext(SimpleRequest value) {
                out.onNext(response(value.getRequestMessage()));
            }

            @Override
            public void onError(Throwable t) {
                ends.accept("bidi " + Status.fromThrowable(t).getCode());
            }

            @Override
            public void onCompleted() {
                out.onCompleted();
            }
        };
    }

    /** The length of {@code all} and the SHA-256 of its ASCII bytes: the client-streaming response. */
    static String digest(CharSequence all) {
        try {
            byte[] d =
                    MessageDigest.getInstance("SHA-256").digest(all.toString().getBytes(StandardCharsets.US_ASCII));
            return all.length() + ":" + HexFormat.of().formatHex(d);
        } catch (NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }

    private static SimpleResponse response(String m) {
        return SimpleResponse.newBuilder().setResponseMessage(m).build();
    }
}
