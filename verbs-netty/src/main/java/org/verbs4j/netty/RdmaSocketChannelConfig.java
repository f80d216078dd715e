package org.verbs4j.netty;

import static io.netty.channel.ChannelOption.ALLOW_HALF_CLOSURE;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_KEEPALIVE;
import static io.netty.channel.ChannelOption.SO_LINGER;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;
import static io.netty.channel.ChannelOption.TCP_NODELAY;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;
import java.util.Map;

/**
 * The options of an {@link RdmaSocketChannel}: Netty's (AUTO_READ, WRITE_BUFFER_WATER_MARK,
 * CONNECT_TIMEOUT_MILLIS, …), the buffer shape ({@link RdmaChannelOption}; SO_RCVBUF and
 * SO_SNDBUF are the receive and send buffers' total bytes), and the TCP ones, which have no
 * meaning over RDMA and are kept only so that code setting them runs (TCP_NODELAY: frames go out
 * at once anyway). Read by the channel when it connects; any thread may set them.
 */
public final class RdmaSocketChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {
    static final int DEFAULT_BUFFER_SIZE = 16 * 1024, DEFAULT_BUFFERS = 16, DEFAULT_PROBE_INTERVAL_MS = 1_000;

    private volatile int bufferSize = DEFAULT_BUFFER_SIZE;
    private volatile int receiveBuffers = DEFAULT_BUFFERS, sendBuffers = DEFAULT_BUFFERS;
    private volatile boolean allowHalfClosure, tcpNoDelay = true, keepAlive, reuseAddress, zeroCopyReads;
    private volatile int soLinger = -1, trafficClass, probeIntervalMillis = DEFAULT_PROBE_INTERVAL_MS;

    RdmaSocketChannelConfig(Channel channel) {
        super(channel);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(
                super.getOptions(),
                SO_RCVBUF,
                SO_SNDBUF,
                TCP_NODELAY,
                SO_KEEPALIVE,
                SO_REUSEADDR,
                SO_LINGER,
                IP_TOS,
                ALLOW_HALF_CLOSURE,
                RdmaChannelOption.BUFFER_SIZE,
                RdmaChannelOption.RECEIVE_BUFFERS,
                RdmaChannelOption.SEND_BUFFERS,
                RdmaChannelOption.PROBE_INTERVAL_MILLIS,
                RdmaChannelOption.ZERO_COPY_READS);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        Object v;
        if (option == SO_RCVBUF) {
            v = getReceiveBufferSize();
        } else if (option == SO_SNDBUF) {
            v = getSendBufferSize();
        } else if (option == TCP_NODELAY) {
            v = tcpNoDelay;
        } else if (option == SO_KEEPALIVE) {
            v = keepAlive;
        } else if (option == SO_REUSEADDR) {
            v = reuseAddress;
        } else if (option == SO_LINGER) {
            v = soLinger;
        } else if (option == IP_TOS) {
            v = trafficClass;
        } else if (option == ALLOW_HALF_CLOSURE) {
            v = allowHalfClosure;
        } else if (option == RdmaChannelOption.BUFFER_SIZE) {
            v = bufferSize;
        } else if (option == RdmaChannelOption.RECEIVE_BUFFERS) {
            v = receiveBuffers;
        } else if (option == RdmaChannelOption.SEND_BUFFERS) {
            v = sendBuffers;
        } else if (option == RdmaChannelOption.PROBE_INTERVAL_MILLIS) {
            v = probeIntervalMillis;
        } else if (option == RdmaChannelOption.ZERO_COPY_READS) {
            v = zeroCopyReads;
        } else {
            return super.getOption(option);
        }
        return (T) v;
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == TCP_NODELAY) {
            setTcpNoDelay((Boolean) value);
        } else if (option == SO_KEEPALIVE) {
            setKeepAlive((Boolean) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_LINGER) {
            setSoLinger((Integer) value);
        } else if (option == IP_TOS) {
            setTrafficClass((Integer) value);
        } else if (option == ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else if (option == RdmaChannelOption.BUFFER_SIZE) {
            bufferSize = bounded("RDMA_BUFFER_SIZE", (Integer) value, 64, Handshake.MAX_BUFFER_SIZE);
        } else if (option == RdmaChannelOption.RECEIVE_BUFFERS) {
            receiveBuffers = bounded(
                    "RDMA_RECEIVE_BUFFERS", (Integer) value, Credits.MIN_RECEIVE_BUFFERS, Handshake.MAX_BUFFERS);
        } else if (option == RdmaChannelOption.SEND_BUFFERS) {
            sendBuffers =
                    bounded("RDMA_SEND_BUFFERS", (Integer) value, Credits.MIN_RECEIVE_BUFFERS, Handshake.MAX_BUFFERS);
        } else if (option == RdmaChannelOption.PROBE_INTERVAL_MILLIS) {
            probeIntervalMillis = bounded("RDMA_PROBE_INTERVAL_MILLIS", (Integer) value, 0, 3_600_000);
        } else if (option == RdmaChannelOption.ZERO_COPY_READS) {
            zeroCopyReads = (Boolean) value;
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    static int bounded(String option, int v, int min, int max) {
        if (v < min || v > max) {
            throw new IllegalArgumentException(
                    option + " is " + v + "; give a value in " + min + ".." + max + " (the transport's buffer bounds)");
        }
        return v;
    }

    int bufferSize() {
        return bufferSize;
    }

    int receiveBuffers() {
        return receiveBuffers;
    }

    int sendBuffers() {
        return sendBuffers;
    }

    int probeIntervalMillis() {
        return probeIntervalMillis;
    }

    boolean zeroCopyReads() {
        return zeroCopyReads;
    }

    private int buffersFor(String option, int bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException(option + " must be positive: " + bytes);
        }
        return Math.min(
                Handshake.MAX_BUFFERS, Math.max(Credits.MIN_RECEIVE_BUFFERS, (bytes + bufferSize - 1) / bufferSize));
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBuffers * bufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setReceiveBufferSize(int bytes) {
        receiveBuffers = buffersFor("SO_RCVBUF", bytes);
        return this;
    }

    @Override
    public int getSendBufferSize() {
        return sendBuffers * bufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setSendBufferSize(int bytes) {
        sendBuffers = buffersFor("SO_SNDBUF", bytes);
        return this;
    }

    @Override
    public boolean isTcpNoDelay() {
        return tcpNoDelay;
    }

    @Override
    public RdmaSocketChannelConfig setTcpNoDelay(boolean on) {
        tcpNoDelay = on;
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    @Override
    public RdmaSocketChannelConfig setSoLinger(int seconds) {
        soLinger = seconds;
        return this;
    }

    @Override
    public boolean isKeepAlive() {
        return keepAlive;
    }

    @Override
    public RdmaSocketChannelConfig setKeepAlive(boolean on) {
        keepAlive = on;
        return this;
    }

    @Override
    public int getTrafficClass() {
        return trafficClass;
    }

    @Override
    public RdmaSocketChannelConfig setTrafficClass(int tc) {
        trafficClass = tc;
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaSocketChannelConfig setReuseAddress(boolean on) {
        reuseAddress = on;
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RdmaSocketChannelConfig setAllowHalfClosure(boolean on) {
        allowHalfClosure = on;
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setConnectTimeoutMillis(int ms) {
        super.setConnectTimeoutMillis(ms);
        return this;
    }

    @Override
    @Deprecated
    public RdmaSocketChannelConfig setMaxMessagesPerRead(int n) {
        super.setMaxMessagesPerRead(n);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteSpinCount(int n) {
        super.setWriteSpinCount(n);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAllocator(ByteBufAllocator a) {
        super.setAllocator(a);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator a) {
        super.setRecvByteBufAllocator(a);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoRead(boolean on) {
        super.setAutoRead(on);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoClose(boolean on) {
        super.setAutoClose(on);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator e) {
        super.setMessageSizeEstimator(e);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark m) {
        super.setWriteBufferWaterMark(m);
        return this;
    }

    @Override
    protected void autoReadCleared() {
        ((RdmaSocketChannel) channel).clearReadPending();
    }
}
