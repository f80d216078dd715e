package org.verbs4j.gpudirect;

/**
 * One GPU as the CUDA driver describes it. Immutable.
 *
 * @param ordinal                the CUDA device ordinal
 * @param name                   e.g. "NVIDIA H200"
 * @param pciAddress             the PCI address in sysfs form, lower case ({@code 0000:3b:00.0})
 * @param totalMemory            bytes of device memory
 * @param dmaBufSupported        {@code CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED}: the driver can export
 *                               its memory as a dma-buf ({@code cuMemGetHandleForAddressRange})
 * @param gpuDirectRdmaSupported {@code CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED}: the GPU
 *                               lets third-party devices (the RDMA adapter) read and write its memory
 */
public record GpuDevice(
        int ordinal,
        String name,
        String pciAddress,
        long totalMemory,
        boolean dmaBufSupported,
        boolean gpuDirectRdmaSupported) {}
