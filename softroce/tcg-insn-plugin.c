/*
 * tcg-insn-plugin.c: a QEMU TCG plugin that counts the guest instructions each vCPU executes,
 * kernel and user apart. Under TCG every guest instruction is emulated, so "how many instructions
 * does each tool run per operation" is what decides a ratio there, and timers and samplers do not
 * answer it reliably (their ticks land at translation-block boundaries). benchmarks/insn-gate.sh
 * builds it and gates on its ops= records; tcg-insn-report.py reads its other files.
 *
 * Build (gcc only; the plugin API is declared below, as QEMU 7.2 exports it, API version 1):
 *   gcc -O2 -shared -fPIC -fvisibility=hidden -o target/tcg-insn.so softroce/tcg-insn-plugin.c -lpthread
 * Use (run-in-guest.sh passes VERBS4J_GUEST_QEMU_ARGS to qemu):
 *   VERBS4J_GUEST_QEMU_ARGS="-plugin target/tcg-insn.so,totals=/tmp/totals.txt,hist=/tmp/hist.txt" \
 *       softroce/run-in-guest.sh ...
 * Options:
 *   totals=PATH  every 250 ms a line "TIME K0 U0 K1 U1": host time (s since the epoch) and the
 *                cumulative instructions of vCPU 0 and vCPU 1 in kernel and user mode (a block
 *                counts as kernel when its address is in the upper half of the address space)
 *   hist=PATH    every 2 s a line "T TIME", then one line "ADDRESS_HEX COUNT" per region of
 *                2^shift bytes that vCPU `vcpu`'s user-mode instructions ran in (cumulative; a
 *                block's instructions all count in the region where the block starts, so regions
 *                much smaller than a block place instructions by block, not one by one);
 *                resolve the addresses with the process's /proc/PID/maps (tcg-insn-report.py)
 *   shift=N      region size for hist (default 8: 256 bytes)
 *   vcpu=N       the vCPU hist and ops count (default 0: the client's, as perftest-compare.sh pins it)
 *   heavy=PATH   every 250 ms a line "TIME" then, per vCPU (0, 1) and mode (kernel, user), the
 *                cumulative executions of the instructions TCG emulates out of line: "LOCK FENCE
 *                PAUSE RDTSC SYSCALL" (LOCK: lock-prefixed or xchg with memory; FENCE: m/l/sfence;
 *                PAUSE: which leaves the vCPU's execution loop; RDTSC: rdtsc and rdtscp; SYSCALL)
 *   ops=PATH     one line "TIME USER KERNEL SITE" per user-mode system call of vCPU `vcpu`: the
 *                host's time (s since the epoch), the user and kernel instructions that vCPU
 *                executed since its previous user-mode system call (the block ending in the
 *                `syscall` included) and the syscall instruction's address (hex). On rxe each post
 *                is one write(2), so in a verbs loop the calls from the post's site delimit its
 *                operations; tcg-insn-report.py --ops adds up what lies between them.
 *   opdelay=US   with ops: after each such system call, the vCPU waits US microseconds (host time)
 *                before its next user-mode block. A peer on another vCPU then answers the operation
 *                before this one polls for the answer, so the poll finds it at the first try and
 *                the operation's count is its work, not a number of empty polls that depends on
 *                how fast the host ran each vCPU.
 *   opdelay-when=PATH  with opdelay: the wait applies only while PATH exists (looked up every 250 ms),
 *                so that one boot can time a benchmark first and count it with opdelay afterwards
 * Counting costs a call per executed block: the guest runs ~2x slower with the plugin loaded.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* QEMU's plugin API (qemu-plugin.h, API version 1), the part used here */
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef void (*plugin_vcpu_udata_cb)(unsigned int vcpu_index, void *userdata);
typedef void (*plugin_tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, plugin_tb_trans_cb cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, plugin_vcpu_udata_cb cb, int flags,
                                          void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_VCPUS 2
#define SLOTS (1u << 20)          /* regions the histogram can hold */
#define KERNEL_HALF 0xffff800000000000ULL

/* one cache line per counter: each vCPU thread writes its own */
static volatile uint64_t totals[MAX_VCPUS][2][8];
static uint64_t keys[SLOTS];      /* region + 1; 0 = free */
static volatile uint64_t counts[SLOTS];
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *totals_path, *hist_path, *heavy_path;
#define HEAVY_KINDS 5               /* LOCK FENCE PAUSE RDTSC SYSCALL */
static volatile uint64_t heavy[MAX_VCPUS][2][8];
static unsigned shift = 8, hist_vcpu = 0;

/* ops=: one record per user-mode system call of vCPU hist_vcpu, written by that vCPU's thread
 * alone into a ring that the writer thread drains (single producer, single consumer) */
struct op { double time; uint64_t user, kernel, site; };
#define OP_RING (1u << 20)
static struct op *op_ring;
static uint64_t op_head, op_tail, op_dropped;   /* head: the vCPU's; tail: the writer's */
static uint64_t op_user, op_kernel;              /* the operation under way */
static bool op_delay_pending;
static unsigned op_delay_us;
static const char *op_delay_when;
static volatile bool op_delay_on = true;          /* opdelay-when: whether its file exists */
static const char *ops_path;
struct syscall_block { uint64_t site; };       /* userdata of a user block that ends in a syscall */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ops=: a block of vCPU hist_vcpu (called by that vCPU's thread only) */
static void count_op(uint64_t n, bool kernel) {
    if (kernel) {
        op_kernel += n;
        return;
    }
    if (op_delay_pending) {
        op_delay_pending = false;
        struct timespec d = {0, (long) op_delay_us * 1000};
        nanosleep(&d, NULL);
    }
    op_user += n;
}

/* ops=: a user block of any vCPU that ends in a syscall, after its on_exec; records an operation */
static void on_exec_syscall(unsigned int vcpu, void *userdata) {
    if (vcpu != hist_vcpu) {
        return;
    }
    uint64_t head = op_head;
    if (head - __atomic_load_n(&op_tail, __ATOMIC_ACQUIRE) < OP_RING) {
        uint64_t site = ((struct syscall_block *) userdata)->site;
        op_ring[head & (OP_RING - 1)] = (struct op) {now(), op_user, op_kernel, site};
        __atomic_store_n(&op_head, head + 1, __ATOMIC_RELEASE);
    } else {
        op_dropped++;
    }
    op_user = op_kernel = 0;
    op_delay_pending = op_delay_us > 0 && op_delay_on;
}

/* userdata of a block: instructions << 22 | slot << 1 | kernel */
static void on_exec(unsigned int vcpu, void *userdata) {
    uintptr_t u = (uintptr_t) userdata;
    uint64_t n = u >> 22;
    bool kernel = u & 1;
    if (vcpu < MAX_VCPUS) {
        totals[vcpu][kernel][0] += n;
    }
    if (!kernel && vcpu == hist_vcpu && hist_path) {
        counts[(u >> 1) & (SLOTS - 1)] += n;
    }
    if (vcpu == hist_vcpu && ops_path) {
        count_op(n, kernel);
    }
}

/* userdata of a block's heavy callback: 8 bits per kind (its count in the block), bit 63 = kernel */
static void on_exec_heavy(unsigned int vcpu, void *userdata) {
    uint64_t u = (uint64_t) (uintptr_t) userdata;
    if (vcpu >= MAX_VCPUS) {
        return;
    }
    unsigned kernel = (unsigned) (u >> 63);
    for (int k = 0; k < HEAVY_KINDS; k++) {
        heavy[vcpu][kernel][k] += (u >> (8 * k)) & 0xff;
    }
}

/* the kind (0..4) of one x86-64 instruction, or -1 */
static int heavy_kind(const uint8_t *b, size_t n) {
    size_t i = 0;
    bool lock = false, rep = false;
    for (; i < n; i++) {
        uint8_t p = b[i];
        if (p == 0xf0) lock = true;
        else if (p == 0xf3) rep = true;
        else if (p != 0xf2 && p != 0x2e && p != 0x36 && p != 0x3e && p != 0x26 && p != 0x64 && p != 0x65
                 && p != 0x66 && p != 0x67) break;
    }
    if (lock) return 0;
    if (i < n && (b[i] & 0xf0) == 0x40) i++; /* REX */
    if (i >= n) return -1;
    uint8_t op = b[i];
    if (op == 0x90 && rep) return 2;
    if ((op == 0x86 || op == 0x87) && i + 1 < n && (b[i + 1] >> 6) != 3) return 0;
    if (op != 0x0f || i + 1 >= n) return -1;
    uint8_t op2 = b[i + 1];
    uint8_t m = i + 2 < n ? b[i + 2] : 0;
    if (op2 == 0xae && m >= 0xe8) return 1;   /* lfence e8-ef, mfence f0-f7, sfence f8-ff */
    if (op2 == 0x31 || (op2 == 0x01 && m == 0xf9)) return 3;
    if (op2 == 0x05) return 4;
    return -1;
}

static uint64_t slot_of(uint64_t region) {
    uint64_t h = (region * 0x9E3779B97F4A7C15ULL) >> 44;
    uint64_t found = 0;
    pthread_mutex_lock(&keys_lock);
    for (uint64_t i = 0; i < SLOTS; i++) {
        uint64_t s = (h + i) & (SLOTS - 1);
        if (keys[s] == region + 1 || keys[s] == 0) {
            keys[s] = region + 1;
            found = s;
            break;
        }
    }
    pthread_mutex_unlock(&keys_lock); /* full: everything else lands in slot 0's region */
    return found;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    uint64_t va = qemu_plugin_tb_vaddr(tb);
    uintptr_t kernel = va >= KERNEL_HALF;
    uintptr_t slot = kernel || !hist_path ? 0 : slot_of(va >> shift);
    uintptr_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, 0 /* no registers */, (void *) (n << 22 | slot << 1 | kernel));
    if (ops_path && !kernel && n > 0) {
        /* a syscall ends its block; callbacks run in the order registered, so after on_exec */
        struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
        if (heavy_kind(qemu_plugin_insn_data(last), qemu_plugin_insn_size(last)) == 4) {
            struct syscall_block *b = malloc(sizeof *b); /* one per translation: a few thousand */
            if (b) {
                b->site = qemu_plugin_insn_vaddr(last);
                qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec_syscall, 0, b);
            }
        }
    }
    if (heavy_path) {
        uint64_t packed = 0;
        for (size_t i = 0; i < n; i++) {
            struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
            int k = heavy_kind(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));
            if (k >= 0 && ((packed >> (8 * k)) & 0xff) < 0xff) {
                packed += 1ULL << (8 * k);
            }
        }
        if (packed) {
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec_heavy, 0, (void *) (uintptr_t) (packed | (uint64_t) kernel << 63));
        }
    }
}

static void *writer(void *unused) {
    FILE *t = totals_path ? fopen(totals_path, "w") : NULL;
    FILE *h = hist_path ? fopen(hist_path, "w") : NULL;
    FILE *x = heavy_path ? fopen(heavy_path, "w") : NULL;
    FILE *o = ops_path ? fopen(ops_path, "w") : NULL;
    for (unsigned tick = 0;; tick++) {
        if (op_delay_when) {
            op_delay_on = access(op_delay_when, F_OK) == 0;
        }
        if (t) {
            fprintf(t, "%.3f %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", now(), totals[0][1][0],
                    totals[0][0][0], totals[1][1][0], totals[1][0][0]);
            fflush(t);
        }
        if (x) {
            fprintf(x, "%.3f", now());
            for (int v = 0; v < MAX_VCPUS; v++) {
                for (int k = 1; k >= 0; k--) {
                    for (int j = 0; j < HEAVY_KINDS; j++) {
                        fprintf(x, " %" PRIu64, heavy[v][k][j]);
                    }
                }
            }
            fputc('\n', x);
            fflush(x);
        }
        if (o) {
            uint64_t head = __atomic_load_n(&op_head, __ATOMIC_ACQUIRE), tail = op_tail;
            for (; tail != head; tail++) {
                struct op *r = &op_ring[tail & (OP_RING - 1)];
                fprintf(o, "%.6f %" PRIu64 " %" PRIu64 " %" PRIx64 "\n", r->time, r->user, r->kernel, r->site);
            }
            __atomic_store_n(&op_tail, tail, __ATOMIC_RELEASE);
            if (op_dropped) {
                fprintf(o, "# dropped %" PRIu64 "\n", op_dropped);
            }
            fflush(o);
        }
        if (h && tick % 8 == 0) {
            fprintf(h, "T %.3f\n", now());
            for (uint64_t s = 0; s < SLOTS; s++) {
                if (keys[s] && counts[s]) {
                    fprintf(h, "%" PRIx64 " %" PRIu64 "\n", (keys[s] - 1) << shift, counts[s]);
                }
            }
            fflush(h);
        }
        usleep(250000);
    }
    return NULL;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc,
                                                                char **argv) {
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "totals=", 7)) totals_path = argv[i] + 7;
        else if (!strncmp(argv[i], "hist=", 5)) hist_path = argv[i] + 5;
        else if (!strncmp(argv[i], "shift=", 6)) shift = (unsigned) atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "heavy=", 6)) heavy_path = argv[i] + 6;
        else if (!strncmp(argv[i], "vcpu=", 5)) hist_vcpu = (unsigned) atoi(argv[i] + 5);
        else if (!strncmp(argv[i], "ops=", 4)) ops_path = argv[i] + 4;
        else if (!strncmp(argv[i], "opdelay=", 8)) op_delay_us = (unsigned) atoi(argv[i] + 8);
        else if (!strncmp(argv[i], "opdelay-when=", 13)) op_delay_when = argv[i] + 13;
        else {
            fprintf(stderr, "tcg-insn-plugin: unknown option %s\n", argv[i]);
            return 1;
        }
    }
    if (!totals_path && !hist_path && !heavy_path && !ops_path) {
        fprintf(stderr, "tcg-insn-plugin: give totals=PATH, hist=PATH, heavy=PATH and/or ops=PATH\n");
        return 1;
    }
    if (op_delay_us >= 1000000) {
        fprintf(stderr, "tcg-insn-plugin: opdelay is in microseconds, below 1000000\n");
        return 1;
    }
    if (ops_path && !(op_ring = calloc(OP_RING, sizeof *op_ring))) {
        fprintf(stderr, "tcg-insn-plugin: no memory for the ops ring\n");
        return 1;
    }
    if (op_delay_when) {
        op_delay_on = access(op_delay_when, F_OK) == 0;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    pthread_t t;
    pthread_create(&t, NULL, writer, NULL);
    return 0;
}
