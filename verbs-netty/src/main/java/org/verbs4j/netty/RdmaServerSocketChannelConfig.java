package org.verbs4j.netty;

import static io.netty.channel.ChannelOption.SO_BACKLOG;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.ServerSocketChannelConfig;
import java.util.Map;

/**
 * The options of an {@link RdmaServerSocketChannel}: SO_BACKLOG (the listener's backlog and the
 * most requests queued while the application does not read; default 128), AUTO_READ, and the
 * socket options that have no meaning over RDMA (kept so that code setting them runs; a child's
 * buffers are set with {@code ServerBootstrap.childOption}). Any thread.
 */
public final class RdmaServerSocketChannelConfig extends DefaultChannelConfig implements ServerSocketChannelConfig {
    private volatile int backlog = 128;
    private volatile int receiveBufferSize = 16 * 16 * 1024;
    private volatile boolean reuseAddress;

    RdmaServerSocketChannelConfig(RdmaServerSocketChannel channel) {
        super(channel);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_BACKLOG, SO_RCVBUF, SO_REUSEADDR);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_BACKLOG) {
            return (T) Integer.valueOf(backlog);
        }
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(receiveBufferSize);
        }
        if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(reuseAddress);
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_BACKLOG) {
            setBacklog((Integer) value);
        } else if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    @Override
    public int getBacklog() {
        return backlog;
    }

    @Override
    public RdmaServerSocketChannelConfig setBacklog(int n) {
        backlog = RdmaSocketChannelConfig.bounded("SO_BACKLOG", n, 1, 1 << 16);
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaServerSocketChannelConfig setReuseAddress(boolean on) {
        reuseAddress = on;
        return this;
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSize;
    }

    @Override
    public RdmaServerSocketChannelConfig setReceiveBufferSize(int bytes) {
        receiveBufferSize = bytes;
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setConnectTimeoutMillis(int ms) {
        super.setConnectTimeoutMillis(ms);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerSocketChannelConfig setMaxMessagesPerRead(int n) {
        super.setMaxMessagesPerRead(n);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setWriteSpinCount(int n) {
        super.setWriteSpinCount(n);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setAllocator(ByteBufAllocator a) {
        super.setAllocator(a);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator a) {
        super.setRecvByteBufAllocator(a);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setAutoRead(boolean on) {
        super.setAutoRead(on);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator e) {
        super.setMessageSizeEstimator(e);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerSocketChannelConfig setWriteBufferHighWaterMark(int n) {
        super.setWriteBufferHighWaterMark(n);
        return this;
    }

    @Override
    @Deprecated
    public RdmaServerSocketChannelConfig setWriteBufferLowWaterMark(int n) {
        super.setWriteBufferLowWaterMark(n);
        return this;
    }

    @Override
    public RdmaServerSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark m) {
        super.setWriteBufferWaterMark(m);
        return this;
    }

    @Override
    protected void autoReadCleared() {
        ((RdmaServerSocketChannel) channel).clearReadPending();
    }
}
