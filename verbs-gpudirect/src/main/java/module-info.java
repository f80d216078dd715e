/**
 * verbs4j GPUDirect RDMA: GPU memory as an RDMA source and target. The CUDA driver API
 * ({@code libcuda.so.1}, loaded lazily; its jextract bindings in a package that is not exported),
 * GPU memory without host views ({@link org.verbs4j.gpudirect.GpuMemory}), its registration by
 * dma-buf or nvidia-peermem ({@link org.verbs4j.gpudirect.GpuRegistrar}), a buffer-pool allocator
 * of GPU memory ({@link org.verbs4j.gpudirect.GpuRegionAllocator}) and a capability report
 * ({@link org.verbs4j.gpudirect.GpuCapabilityReport}). Grant native access to
 * {@code org.verbs4j.gpudirect} (and to {@code org.verbs4j.natives}, {@code org.verbs4j.core}).
 */
module org.verbs4j.gpudirect {
    requires transitive org.verbs4j.core;
    requires org.slf4j;

    exports org.verbs4j.gpudirect;
}
