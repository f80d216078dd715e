/*
 * A stand-in libcuda.so.1 for host tests (no NVIDIA driver, no GPU): the CUDA driver API
 * functions verbs-gpudirect binds, by the versioned names cuda.h selects (cuMemAlloc_v2, ...),
 * with the same prototypes. "Device memory" is host memory here, but verbs4j never dereferences
 * it: it only passes the addresses back to these functions and to the (stand-in) provider.
 *
 * It checks what the real driver checks and what GPUDirect RDMA needs: a current context on the
 * calling thread for memory calls, copies inside live allocations, dma-buf ranges host-page
 * aligned, frees of live allocations only. And it records what tests assert: live allocations,
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS per allocation, whether the dma-buf fd of an allocation was
 * still open when it was freed.
 *
 * Build: gcc -O2 -fPIC -shared -o libstandin_cuda.so standin_cuda.c
 * -DSTANDIN_INIT_RESULT=100 makes cuInit fail with CUDA_ERROR_NO_DEVICE.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#ifndef STANDIN_INIT_RESULT
#define STANDIN_INIT_RESULT 0
#endif

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;

enum {
    SUCCESS = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
    INVALID_DEVICE = 101, INVALID_CONTEXT = 201, NOT_SUPPORTED = 801
};

#define MAX_ALLOCS 256
struct alloc {
    uintptr_t ptr;
    size_t size;
    int sync_memops;
    int dmabuf_fd;
};

static struct alloc allocs[MAX_ALLOCS];
static int initialised;
static int device_count = 1;
static int attr_dmabuf = 1, attr_gdr = 1;
static CUresult export_result = SUCCESS;
static long long frees, fd_open_at_free = -1, exports;
static char contexts[8];
static __thread CUcontext current;

static const char *names[][2] = {
    {"CUDA_SUCCESS", "no error"},
    {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
};

EXPORT CUresult cuGetErrorName(CUresult e, const char **s)
{
    switch (e) {
    case SUCCESS: case INVALID_VALUE: case OUT_OF_MEMORY: case NOT_INITIALIZED: *s = names[e][0]; return SUCCESS;
    case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return SUCCESS;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return SUCCESS;
    case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return SUCCESS;
    default: return INVALID_VALUE;
    }
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
    switch (e) {
    case SUCCESS: case INVALID_VALUE: case OUT_OF_MEMORY: case NOT_INITIALIZED: *s = names[e][1]; return SUCCESS;
    case NO_DEVICE: *s = "no CUDA-capable device is detected"; return SUCCESS;
    case INVALID_DEVICE: *s = "invalid device ordinal"; return SUCCESS;
    case INVALID_CONTEXT: *s = "invalid device context"; return SUCCESS;
    case NOT_SUPPORTED: *s = "operation not supported"; return SUCCESS;
    default: return INVALID_VALUE;
    }
}

EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return INVALID_VALUE;
    if (STANDIN_INIT_RESULT != 0)
        return STANDIN_INIT_RESULT;
    initialised = 1;
    return SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return INVALID_VALUE;
    *v = 13000;
    return SUCCESS;
}

#define NEED_INIT() do { if (!initialised) return NOT_INITIALIZED; } while (0)
#define NEED_DEV(d) do { NEED_INIT(); if ((d) < 0 || (d) >= device_count) return INVALID_DEVICE; } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!current) return INVALID_CONTEXT; } while (0)

EXPORT CUresult cuDeviceGetCount(int *n) { NEED_INIT(); *n = device_count; return SUCCESS; }

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    NEED_DEV(ordinal);
    *d = ordinal;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    NEED_DEV(d);
    snprintf(name, (size_t)len, "verbs4j stand-in GPU %d", d);
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d)
{
    NEED_DEV(d);
    snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x3d + d); /* upper case, as the driver writes it */
    return SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    NEED_DEV(d);
    *bytes = (size_t)80 << 30;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    NEED_DEV(d);
    switch (attr) {
    case 124: *v = attr_dmabuf; return SUCCESS;   /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
    case 116: *v = attr_gdr; return SUCCESS;      /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED */
    case 33: *v = 0x3d + d; return SUCCESS;       /* PCI_BUS_ID */
    default: return INVALID_VALUE;
    }
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    NEED_DEV(d);
    *ctx = (CUcontext)&contexts[d & 7];
    return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { NEED_DEV(d); return SUCCESS; }

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { NEED_INIT(); current = ctx; return SUCCESS; }

EXPORT CUresult cuCtxSynchronize(void) { NEED_CTX(); return SUCCESS; }

static struct alloc *find(uintptr_t p, size_t len)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = &allocs[i];
        if (a->ptr && p >= a->ptr && len <= a->size && p - a->ptr <= a->size - len)
            return a;
    }
    return NULL;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    NEED_CTX();
    if (size == 0)
        return INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].ptr) {
            void *p = NULL;
            if (posix_memalign(&p, 1 << 16, size))  /* the driver aligns allocations generously */
                return OUT_OF_MEMORY;
            allocs[i] = (struct alloc){ (uintptr_t)p, size, 0, -1 };
            *dptr = (CUdeviceptr)(uintptr_t)p;
            return SUCCESS;
        }
    }
    return OUT_OF_MEMORY;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NEED_CTX();
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].ptr && allocs[i].ptr == (uintptr_t)dptr) {
            if (allocs[i].dmabuf_fd >= 0)
                fd_open_at_free = fcntl(allocs[i].dmabuf_fd, F_GETFD) != -1;
            free((void *)allocs[i].ptr);
            memset(&allocs[i], 0, sizeof(allocs[i]));
            frees++;
            return SUCCESS;
        }
    }
    return INVALID_VALUE;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    NEED_CTX();
    if (!find((uintptr_t)dst, n))
        return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    NEED_CTX();
    if (!find((uintptr_t)src, n))
        return INVALID_VALUE;
    memcpy(dst, (void *)(uintptr_t)src, n);
    return SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n)
{
    NEED_CTX();
    if (!find((uintptr_t)dst, n))
        return INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return SUCCESS;
}

EXPORT CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr p)
{
    NEED_CTX();
    struct alloc *a = find((uintptr_t)p, 1);
    if (!a || !value)
        return INVALID_VALUE;
    if (attr != 6)                                  /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */
        return INVALID_VALUE;
    a->sync_memops = *(const int *)value;
    return SUCCESS;
}

EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, int type,
                                              unsigned long long flags)
{
    NEED_CTX();
    if (export_result != SUCCESS)
        return export_result;
    if (type != 1 || flags != 0 || !handle)         /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
        return INVALID_VALUE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (p % page || size % page)                    /* host-page aligned, as the driver requires */
        return INVALID_VALUE;
    struct alloc *a = find((uintptr_t)p, size);
    if (!a)
        return INVALID_VALUE;
    int fd = memfd_create("standin-dmabuf", MFD_CLOEXEC);
    if (fd < 0)
        return OUT_OF_MEMORY;
    a->dmabuf_fd = fd;
    exports++;
    *(int *)handle = fd;
    return SUCCESS;
}

/* ---- controls and getters for tests ---- */

EXPORT void standin_cuda_configure(int count, int dmabuf, int gdr, int export_rc)
{
    device_count = count;
    attr_dmabuf = dmabuf;
    attr_gdr = gdr;
    export_result = export_rc;
}

EXPORT int standin_cuda_live_allocations(void)
{
    int n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++)
        n += allocs[i].ptr != 0;
    return n;
}

EXPORT int standin_cuda_sync_memops(CUdeviceptr p)
{
    struct alloc *a = find((uintptr_t)p, 1);
    return a ? a->sync_memops : -1;
}

/* 1: the last freed allocation's dma-buf fd was still open; 0: closed; -1: none exported yet */
EXPORT long long standin_cuda_fd_open_at_free(void) { return fd_open_at_free; }
EXPORT long long standin_cuda_frees(void) { return frees; }
EXPORT long long standin_cuda_exports(void) { return exports; }
