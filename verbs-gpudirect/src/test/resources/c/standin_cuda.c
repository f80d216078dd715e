/*
 * A stand-in libcuda.so.1 for host tests (no NVIDIA driver, no GPU): the CUDA driver API
 * functions verbs-gpudirect binds, by the versioned names cuda.h selects (cuMemAlloc_v2, ...),
 * with the same prototypes.
 *
 * "Device memory" behaves as a real driver's does for the host: each allocation is a memfd
 * ("standin-gpu") mapped twice, at the device address with PROT_NONE (a host dereference of a
 * device pointer faults, as it does on a GPU) and once more, read-write, as a shadow that
 * only the copy and memset functions here use. standin_cuda_set_host_visible(1) maps the device
 * address read-write instead (the same pages as the shadow), for the one thing a test needs it
 * for: letting a software RDMA device (rxe) pin the range, as nvidia-peermem lets a real
 * adapter pin GPU memory.
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
#include <pthread.h>
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
#define DEVICE_ALIGN ((uintptr_t)1 << 16)  /* the driver aligns allocations generously */
struct alloc {
    uintptr_t ptr;          /* the device address: PROT_NONE unless host_visible */
    size_t size;            /* what was asked for */
    size_t mapped;          /* size rounded up to whole host pages */
    unsigned char *shadow;  /* the same pages, read-write: what the copies use */
    int sync_memops;
    int dmabuf_fd;
};

/* The driver API is thread-safe: one lock over the allocation table and the counters; the
 * settings (what cuInit and the tests' controls set) are atomics. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc allocs[MAX_ALLOCS];
static long long frees, fd_open_at_free = -1, exports;
static _Atomic int initialised;
static _Atomic int device_count = 1;
static _Atomic int attr_dmabuf = 1, attr_gdr = 1;
static _Atomic CUresult export_result = SUCCESS;
static _Atomic int host_visible;
static char contexts[8];
static __thread CUcontext current;
#define LOCKED(call) do { pthread_mutex_lock(&lock); CUresult r_ = (call); pthread_mutex_unlock(&lock); return r_; } \
    while (0)

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

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* the live allocation holding [p, p + len); the caller holds the lock */
static struct alloc *find(uintptr_t p, size_t len)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = &allocs[i];
        if (a->ptr && p >= a->ptr && len <= a->size && p - a->ptr <= a->size - len)
            return a;
    }
    return NULL;
}

/* A memfd of `mapped` bytes, mapped at a DEVICE_ALIGN-aligned device address (PROT_NONE unless
 * host_visible) and as a read-write shadow. */
static CUresult map_device_memory(struct alloc *a, size_t size)
{
    size_t mapped = (size + page_size() - 1) / page_size() * page_size();
    int fd = memfd_create("standin-gpu", MFD_CLOEXEC);
    if (fd < 0)
        return OUT_OF_MEMORY;
    CUresult rc = OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)mapped) != 0)
        goto out;
    void *shadow = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shadow == MAP_FAILED)
        goto out;
    /* reserve room to align, map the memfd over the aligned part, give the rest back */
    size_t span = mapped + DEVICE_ALIGN;
    void *room = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (room == MAP_FAILED) {
        munmap(shadow, mapped);
        goto out;
    }
    uintptr_t start = ((uintptr_t)room + DEVICE_ALIGN - 1) & ~(DEVICE_ALIGN - 1);
    int prot = host_visible ? PROT_READ | PROT_WRITE : PROT_NONE;
    if (mmap((void *)start, mapped, prot, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        munmap(room, span);
        munmap(shadow, mapped);
        goto out;
    }
    if (start > (uintptr_t)room)
        munmap(room, start - (uintptr_t)room);
    uintptr_t end = (uintptr_t)room + span;
    if (end > start + mapped)
        munmap((void *)(start + mapped), end - (start + mapped));
    *a = (struct alloc){ start, size, mapped, shadow, 0, -1 };
    rc = SUCCESS;
out:
    close(fd);
    return rc;
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size)
{
    NEED_CTX();
    if (size == 0 || !dptr)
        return INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].ptr) {
            CUresult rc = map_device_memory(&allocs[i], size);
            if (rc == SUCCESS)
                *dptr = (CUdeviceptr)allocs[i].ptr;
            return rc;
        }
    }
    return OUT_OF_MEMORY;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { LOCKED(mem_alloc(dptr, size)); }

static CUresult mem_free(CUdeviceptr dptr)
{
    NEED_CTX();
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = &allocs[i];
        if (a->ptr && a->ptr == (uintptr_t)dptr) {
            if (a->dmabuf_fd >= 0)
                fd_open_at_free = fcntl(a->dmabuf_fd, F_GETFD) != -1;
            munmap((void *)a->ptr, a->mapped);
            munmap(a->shadow, a->mapped);
            memset(a, 0, sizeof(*a));
            frees++;
            return SUCCESS;
        }
    }
    return INVALID_VALUE;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { LOCKED(mem_free(dptr)); }

/* the shadow of [p, p + n), or NULL outside every live allocation; the caller holds the lock */
static unsigned char *shadow_of(CUdeviceptr p, size_t n)
{
    struct alloc *a = find((uintptr_t)p, n);
    return a ? a->shadow + ((uintptr_t)p - a->ptr) : NULL;
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n)
{
    NEED_CTX();
    unsigned char *to = shadow_of(dst, n);
    if (!to || !src)
        return INVALID_VALUE;
    memcpy(to, src, n);
    return SUCCESS;
}

/* standin_cuda_hold_copies(1): copies wait here (not holding the lock) until it is set back to 0 */
static _Atomic int hold_copies, copies_held;

static void wait_while_held(void)
{
    if (!hold_copies)
        return;
    copies_held++;
    while (hold_copies)
        usleep(200);
    copies_held--;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    wait_while_held();
    LOCKED(copy_htod(dst, src, n));
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    NEED_CTX();
    const unsigned char *from = shadow_of(src, n);
    if (!from || !dst)
        return INVALID_VALUE;
    memcpy(dst, from, n);
    return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    wait_while_held();
    LOCKED(copy_dtoh(dst, src, n));
}

static CUresult memset_d8(CUdeviceptr dst, unsigned char v, size_t n)
{
    NEED_CTX();
    unsigned char *to = shadow_of(dst, n);
    if (!to)
        return INVALID_VALUE;
    memset(to, v, n);
    return SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) { LOCKED(memset_d8(dst, v, n)); }

static CUresult pointer_set_attribute(const void *value, int attr, CUdeviceptr p)
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

EXPORT CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr p)
{
    LOCKED(pointer_set_attribute(value, attr, p));
}

static CUresult export_range(void *handle, CUdeviceptr p, size_t size, int type, unsigned long long flags)
{
    NEED_CTX();
    if (export_result != SUCCESS)
        return export_result;
    if (type != 1 || flags != 0 || !handle)         /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
        return INVALID_VALUE;
    if (p % page_size() || size % page_size())      /* host-page aligned, as the driver requires */
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

EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, int type,
                                              unsigned long long flags)
{
    LOCKED(export_range(handle, p, size, type, flags));
}

/* ---- controls and getters for tests ---- */

EXPORT void standin_cuda_configure(int count, int dmabuf, int gdr, int export_rc)
{
    device_count = count;
    attr_dmabuf = dmabuf;
    attr_gdr = gdr;
    export_result = export_rc;
}

/* 1: later allocations map their device addresses read-write (see the top of the file); 0: PROT_NONE */
EXPORT void standin_cuda_set_host_visible(int visible) { host_visible = visible; }

/* 1: later copies wait until it is 0 again (a copy that stays in the driver); 0: they run */
EXPORT void standin_cuda_hold_copies(int hold) { hold_copies = hold; }

/* how many copies are waiting in standin_cuda_hold_copies right now */
EXPORT int standin_cuda_copies_held(void) { return copies_held; }

static int live_allocations(void)
{
    int n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++)
        n += allocs[i].ptr != 0;
    return n;
}

static int sync_memops(CUdeviceptr p)
{
    struct alloc *a = find((uintptr_t)p, 1);
    return a ? a->sync_memops : -1;
}

EXPORT int standin_cuda_live_allocations(void) { LOCKED(live_allocations()); }
EXPORT int standin_cuda_sync_memops(CUdeviceptr p) { LOCKED(sync_memops(p)); }

/* 1: the last freed allocation's dma-buf fd was still open; 0: closed; -1: none exported yet */
EXPORT long long standin_cuda_fd_open_at_free(void)
{
    pthread_mutex_lock(&lock);
    long long v = fd_open_at_free;
    pthread_mutex_unlock(&lock);
    return v;
}

EXPORT long long standin_cuda_frees(void)
{
    pthread_mutex_lock(&lock);
    long long v = frees;
    pthread_mutex_unlock(&lock);
    return v;
}

EXPORT long long standin_cuda_exports(void)
{
    pthread_mutex_lock(&lock);
    long long v = exports;
    pthread_mutex_unlock(&lock);
    return v;
}
