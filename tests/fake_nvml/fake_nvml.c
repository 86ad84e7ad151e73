/* A stand-in libnvidia-ml.so for machines without a GPU: the NVML functions the kernel calls,
 * answering from a script file ($FAKE_NVML_SCRIPT) that is re-read on every call, so a test can
 * change what the "GPU" holds while the kernel runs. Script lines:
 *   gpu  NVML_INDEX BUS_ID UUID TOTAL_BYTES FREE_BYTES NAME...
 *                          (FREE_BYTES `auto`: the total less every proc and used line's bytes)
 *   proc NVML_INDEX PID USED_BYTES   (or @PATH: the size of that file, 0 when it is gone, so a
 *                                    process "frees GPU memory" by deleting the file)
 *   used NVML_INDEX USED_BYTES       (or @PATH: memory in use that no listed process owns, as a
 *                                    container's NVML shows)
 *   fail processes CODE              (listing a GPU's processes fails with that NVML error)
 * GPUs are enumerated in the order their lines appear. Struct layouts follow nvml.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int nvmlReturn_t;
enum { OK = 0, ERR_UNINIT = 1, ERR_INVALID = 2, ERR_INSUFFICIENT = 7, ERR_UNKNOWN = 999 };

typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct fake_device *nvmlDevice_t;

#define MAX_GPUS 16
#define MAX_PROCS 64
struct gpu { unsigned index; char bus[32], uuid[80], name[96]; unsigned long long total, free; int auto_free; };
struct proc { unsigned index, pid; unsigned long long used; };
static struct gpu gpus[MAX_GPUS];
static struct proc procs[MAX_PROCS];
static unsigned n_gpus, n_procs;
static int initialized, fail_processes;
/* Bytes in use per GPU line that no process owns (`used` lines). */
static unsigned long long unowned[MAX_GPUS];

static unsigned long long bytes_of(const char *word) {
    struct stat st;
    if (word[0] == '@') return stat(word + 1, &st) == 0 ? (unsigned long long)st.st_size : 0;
    return strtoull(word, NULL, 10);
}

static int load(void) {
    const char *path = getenv("FAKE_NVML_SCRIPT");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[512], word[256];
    n_gpus = n_procs = 0;
    fail_processes = 0;
    memset(unowned, 0, sizeof unowned);
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        struct gpu g;
        struct proc p;
        char free_word[64];
        unsigned index;
        int used = 0, code;
        if (n_gpus < MAX_GPUS &&
            sscanf(line, "gpu %u %31s %79s %llu %63s %n", &g.index, g.bus, g.uuid, &g.total, free_word, &used) == 5) {
            snprintf(g.name, sizeof g.name, "%s", line + used);
            g.name[strcspn(g.name, "\r\n")] = 0;
            g.auto_free = strcmp(free_word, "auto") == 0;
            g.free = g.auto_free ? g.total : strtoull(free_word, NULL, 10);
            gpus[n_gpus++] = g;
        } else if (n_procs < MAX_PROCS && sscanf(line, "proc %u %u %255s", &p.index, &p.pid, word) == 3) {
            p.used = bytes_of(word);
            procs[n_procs++] = p;
        } else if (sscanf(line, "used %u %255s", &index, word) == 2) {
            for (unsigned k = 0; k < n_gpus; k++)
                if (gpus[k].index == index) unowned[k] += bytes_of(word);
        } else if (sscanf(line, "fail processes %d", &code) == 1) {
            fail_processes = code;
        }
    }
    fclose(f);
    /* An `auto` GPU's free memory is what its processes and unowned use leave. */
    for (unsigned k = 0; k < n_gpus; k++) {
        if (!gpus[k].auto_free) continue;
        unsigned long long in_use = unowned[k];
        for (unsigned i = 0; i < n_procs; i++)
            if (procs[i].index == gpus[k].index) in_use += procs[i].used;
        gpus[k].free = in_use < gpus[k].total ? gpus[k].total - in_use : 0;
    }
    return 1;
}

/* Handles are 1-based positions, so a null handle is never valid. */
static struct gpu *gpu_of(nvmlDevice_t d) {
    size_t k = (size_t)d;
    if (!initialized || !load() || k == 0 || k > n_gpus) return NULL;
    return &gpus[k - 1];
}

nvmlReturn_t nvmlInit_v2(void) { initialized = 1; return OK; }
nvmlReturn_t nvmlInitWithFlags(unsigned flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { initialized = 0; return OK; }
const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case OK: return "Success";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    default: return "fake NVML error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned len) {
    snprintf(out, len, "555.42.06");
    return OK;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    if (!initialized) return ERR_UNINIT;
    load();
    *count = n_gpus;
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    if (!initialized) return ERR_UNINIT;
    load();
    for (unsigned k = 0; k < n_gpus; k++)
        if (gpus[k].index == index) { *device = (nvmlDevice_t)(size_t)(k + 1); return OK; }
    return ERR_INVALID;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *out, unsigned len) {
    struct gpu *g = gpu_of(d);
    if (!g) return ERR_INVALID;
    snprintf(out, len, "%s", g->name);
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *out, unsigned len) {
    struct gpu *g = gpu_of(d);
    if (!g) return ERR_INVALID;
    snprintf(out, len, "%s", g->uuid);
    return OK;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    struct gpu *g = gpu_of(d);
    if (!g) return ERR_INVALID;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", g->bus);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", g->bus);
    sscanf(g->bus, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    struct gpu *g = gpu_of(d);
    if (!g) return ERR_INVALID;
    m->total = g->total;
    m->free = g->free;
    m->reserved = 0;
    m->used = g->total - g->free;
    return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *out) {
    struct gpu *g = gpu_of(d);
    if (!g) return ERR_INVALID;
    if (fail_processes) return fail_processes;
    unsigned n = 0;
    for (unsigned k = 0; k < n_procs; k++)
        if (procs[k].index == g->index) n++;
    if (out == NULL || *count < n) { *count = n; return n ? ERR_INSUFFICIENT : OK; }
    unsigned i = 0;
    for (unsigned k = 0; k < n_procs; k++)
        if (procs[k].index == g->index) {
            out[i].pid = procs[k].pid;
            out[i].usedGpuMemory = procs[k].used;
            out[i].gpuInstanceId = out[i].computeInstanceId = 0xFFFFFFFFu;
            i++;
        }
    *count = n;
    return OK;
}
