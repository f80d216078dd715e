/**
 * verbs4j Netty transport: a Netty 4.2 {@code IoHandler} over RDMA reliable connections, with
 * client and server channels connected through rdma_cm, so that Netty applications (gRPC-java
 * among them) run over verbs4j with only the event loop group and the channel class changed.
 * Grant native access to {@code org.verbs4j.natives} and {@code org.verbs4j.core}.
 */
module org.verbs4j.netty {
    requires transitive org.verbs4j.core;
    requires transitive io.netty.transport;
    requires transitive io.netty.buffer;
    requires io.netty.common;
    requires org.slf4j;

    exports org.verbs4j.netty;
}
