/* emu_cudart_dev.c -- the runtime calls NCCL programs and test suites use
 * around their collectives: device properties and attributes, limits and
 * flags, peer access, host-registered memory, stream-ordered allocation,
 * stream priorities and flags, event record flags, and function attribute
 * queries (no occupancy: there are no kernels to size).
 *
 * Thread-safety: all thread-safe; per-device state (flags, limits, peer
 * access) is one atomic word per fact, the host-registration table is
 * under a mutex (registration is never a hot path).
 * Signal-safety: none is async-signal-safe.
 *
 * What the emulated device is: an "NCCLEMU CPU device", compute capability
 * 9.0, one priority level, every pair of devices peer-capable (they share
 * the host's memory), memory sizes taken from the host.
 */
#include "emu_core.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_MAX_DEV 64

static _Atomic unsigned emu_dev_flags[EMU_MAX_DEV];
static _Atomic uint64_t emu_peer_on[EMU_MAX_DEV];     /* bit p: this device enabled access to p */
static _Atomic size_t emu_limit_val[EMU_MAX_DEV][8];  /* cudaLimit values set, 0 = default */

static int emu_dev_ok(int d) { return d >= 0 && d < emu_device_count() && d < EMU_MAX_DEV; }

static size_t emu_host_bytes(int avail)
{
  long pages = sysconf(avail ? _SC_AVPHYS_PAGES : _SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)16 << 30;
}

EMU_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
  if (!p)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(device))
    return cudaErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "NCCLEMU CPU device %d", device);
  p->uuid.bytes[0] = 'E';
  p->uuid.bytes[1] = 'M';
  p->uuid.bytes[15] = (char)device;
  p->totalGlobalMem = emu_host_bytes(0);
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->sharedMemPerMultiprocessor = 228 << 10;
  p->regsPerBlock = p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->memPitch = SIZE_MAX / 2;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->totalConstMem = 64 << 10;
  p->major = 9;
  p->minor = 0;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->multiProcessorCount = 132;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxBlocksPerMultiProcessor = 32;
  p->canMapHostMemory = 1;
  p->concurrentKernels = 1;
  p->pciBusID = device + 1;
  p->asyncEngineCount = 2;
  p->unifiedAddressing = 1;
  p->memoryBusWidth = 5120;
  p->l2CacheSize = 50 << 20;
  p->streamPrioritiesSupported = 0; /* one level: cudaDeviceGetStreamPriorityRange */
  p->managedMemory = 1;
  p->concurrentManagedAccess = 1;
  p->pageableMemoryAccess = 1;
  p->hostRegisterSupported = 1;
  p->memoryPoolsSupported = 1;
  p->cooperativeLaunch = 1;
  p->canUseHostPointerForRegisteredMem = 1;
  p->deviceNumaId = p->hostNumaId = -1;
  return cudaSuccess;
}

/* One row per attribute the emulator answers; the rest are 0, as a device
 * without the feature would say. */
EMU_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
  if (!value)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(device))
    return cudaErrorInvalidDevice;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
  case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
  case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
  case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
  case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
  case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
  case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
  case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
  case cudaDevAttrWarpSize: *value = p.warpSize; break;
  case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
  case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
  case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
  case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
  case cudaDevAttrPciBusId: *value = p.pciBusID; break;
  case cudaDevAttrPciDeviceId: case cudaDevAttrPciDomainId: *value = 0; break;
  case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
  case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
  case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
  case cudaDevAttrUnifiedAddressing: case cudaDevAttrCanMapHostMemory: case cudaDevAttrConcurrentKernels:
  case cudaDevAttrManagedMemory: case cudaDevAttrConcurrentManagedAccess: case cudaDevAttrPageableMemoryAccess:
  case cudaDevAttrHostRegisterSupported: case cudaDevAttrMemoryPoolsSupported: case cudaDevAttrCooperativeLaunch:
  case cudaDevAttrCanUseHostPointerForRegisteredMem:
    *value = 1;
    break;
  default: *value = 0; break;
  }
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
  if (!id || len <= 0)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(device))
    return cudaErrorInvalidDevice;
  snprintf(id, (size_t)len, "00000000:%02X:00.0", device + 1);
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *id)
{
  unsigned dom, bus, dev, fn;
  if (!device || !id || sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || !emu_dev_ok((int)bus - 1))
    return cudaErrorInvalidValue;
  *device = (int)bus - 1;
  return cudaSuccess;
}

EMU_API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
  if (!free_b || !total)
    return cudaErrorInvalidValue;
  *free_b = emu_host_bytes(1);
  *total = emu_host_bytes(0);
  return cudaSuccess;
}

EMU_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
  atomic_store(&emu_dev_flags[emu_get_device() % EMU_MAX_DEV], flags);
  return cudaSuccess;
}

EMU_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
  if (!flags)
    return cudaErrorInvalidValue;
  *flags = atomic_load(&emu_dev_flags[emu_get_device() % EMU_MAX_DEV]);
  return cudaSuccess;
}

EMU_API cudaError_t cudaInitDevice(int device, unsigned int dflags, unsigned int flags)
{
  (void)dflags;
  (void)flags;
  return emu_dev_ok(device) ? cudaSuccess : cudaErrorInvalidDevice;
}

/* The emulator keeps no device state to reset beyond pending work. */
EMU_API cudaError_t cudaDeviceReset(void)
{
  emu_device_sync(emu_get_device());
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
  if ((unsigned)limit >= 8)
    return cudaErrorUnsupportedLimit;
  atomic_store(&emu_limit_val[emu_get_device() % EMU_MAX_DEV][limit], value);
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceGetLimit(size_t *value, enum cudaLimit limit)
{
  if (!value)
    return cudaErrorInvalidValue;
  if ((unsigned)limit >= 8)
    return cudaErrorUnsupportedLimit;
  size_t v = atomic_load(&emu_limit_val[emu_get_device() % EMU_MAX_DEV][limit]);
  static const size_t dflt[8] = { 1024, 1 << 20, 8 << 20, 24, 2048, 0, 0, 0 };
  *value = v ? v : dflt[limit];
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache c) { (void)c; return cudaSuccess; }

EMU_API cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *c)
{
  if (!c)
    return cudaErrorInvalidValue;
  *c = cudaFuncCachePreferNone;
  return cudaSuccess;
}

/* ---- peer access: every device can reach every other (one host memory) -- */

EMU_API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
  if (!can)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(device) || !emu_dev_ok(peer))
    return cudaErrorInvalidDevice;
  *can = device != peer;
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
  int me = emu_get_device();
  if (flags)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(peer) || peer == me)
    return cudaErrorInvalidDevice;
  uint64_t bit = 1ull << peer;
  if (atomic_fetch_or(&emu_peer_on[me % EMU_MAX_DEV], bit) & bit)
    return cudaErrorPeerAccessAlreadyEnabled;
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
  int me = emu_get_device();
  if (!emu_dev_ok(peer))
    return cudaErrorInvalidDevice;
  uint64_t bit = 1ull << peer;
  if (!(atomic_fetch_and(&emu_peer_on[me % EMU_MAX_DEV], ~bit) & bit))
    return cudaErrorPeerAccessNotEnabled;
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int src, int dst)
{
  if (!value)
    return cudaErrorInvalidValue;
  if (!emu_dev_ok(src) || !emu_dev_ok(dst))
    return cudaErrorInvalidDevice;
  *value = attr == cudaDevP2PAttrPerformanceRank ? 0 : src != dst;
  return cudaSuccess;
}

EMU_API cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
  if (!emu_dev_ok(dd) || !emu_dev_ok(sd))
    return cudaErrorInvalidDevice;
  return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}

EMU_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s)
{
  if (!emu_dev_ok(dd) || !emu_dev_ok(sd))
    return cudaErrorInvalidDevice;
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}

/* ---- host-registered memory ------------------------------------------- */

struct emu_hreg {
  struct emu_hreg *next;
  const char *base;
  size_t size;
  unsigned flags;
};
static pthread_mutex_t emu_hreg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_hreg *emu_hregs;   /* under emu_hreg_mu */

static struct emu_hreg *emu_hreg_find(const void *p)   /* under emu_hreg_mu */
{
  for (struct emu_hreg *r = emu_hregs; r; r = r->next)
    if ((const char *)p >= r->base && (const char *)p < r->base + r->size)
      return r;
  return NULL;
}

EMU_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
  if (!ptr || !size)
    return cudaErrorInvalidValue;
  struct emu_hreg *r = calloc(1, sizeof *r);
  if (!r)
    return cudaErrorMemoryAllocation;
  pthread_mutex_lock(&emu_hreg_mu);
  if (emu_hreg_find(ptr) || emu_hreg_find((char *)ptr + size - 1)) {
    pthread_mutex_unlock(&emu_hreg_mu);
    free(r);
    return cudaErrorHostMemoryAlreadyRegistered;
  }
  r->base = ptr;
  r->size = size;
  r->flags = flags;
  r->next = emu_hregs;
  emu_hregs = r;
  pthread_mutex_unlock(&emu_hreg_mu);
  return cudaSuccess;
}

EMU_API cudaError_t cudaHostUnregister(void *ptr)
{
  pthread_mutex_lock(&emu_hreg_mu);
  for (struct emu_hreg **pp = &emu_hregs; *pp; pp = &(*pp)->next) {
    if ((*pp)->base == ptr) {
      struct emu_hreg *r = *pp;
      *pp = r->next;
      pthread_mutex_unlock(&emu_hreg_mu);
      free(r);
      return cudaSuccess;
    }
  }
  pthread_mutex_unlock(&emu_hreg_mu);
  return cudaErrorHostMemoryNotRegistered;
}

EMU_API cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags)
{
  if (!dev || !host || flags)
    return cudaErrorInvalidValue;
  *dev = host;   /* mapped host memory has the same address on the device */
  return cudaSuccess;
}

EMU_API cudaError_t cudaHostGetFlags(unsigned int *flags, void *host)
{
  if (!flags)
    return cudaErrorInvalidValue;
  pthread_mutex_lock(&emu_hreg_mu);
  struct emu_hreg *r = emu_hreg_find(host);
  unsigned f = r ? r->flags : 0;
  pthread_mutex_unlock(&emu_hreg_mu);
  if (!r)
    return cudaErrorInvalidValue;
  *flags = f;
  return cudaSuccess;
}

/* Device and host memory are the same heap: a registered host range says
 * host, anything else says device (of the current device). */
EMU_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
  if (!a)
    return cudaErrorInvalidValue;
  memset(a, 0, sizeof *a);
  pthread_mutex_lock(&emu_hreg_mu);
  int host = emu_hreg_find(ptr) != NULL;
  pthread_mutex_unlock(&emu_hreg_mu);
  a->type = !ptr ? cudaMemoryTypeUnregistered : host ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
  a->device = emu_get_device();
  a->devicePointer = (void *)ptr;
  a->hostPointer = host ? (void *)ptr : NULL;
  return cudaSuccess;
}

EMU_API cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
  (void)flags;
  return cudaMalloc(p, size);
}

/* ---- stream-ordered allocation ---------------------------------------- */

/* The memory exists at once (host memory); the free is stream work, so a
 * buffer is released only after the work queued before it. */
EMU_API cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
  (void)s;
  if (!p)
    return cudaErrorInvalidValue;
  *p = NULL;
  if (!size)
    return cudaSuccess;
  return posix_memalign(p, 256, size) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

struct emu_free_work {
  struct emu_work w;
  void *p;
};

static void emu_free_run(struct emu_work *w)
{
  struct emu_free_work *f = (struct emu_free_work *)w;
  free(f->p);
  free(f);
}

EMU_API cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
  if (!p)
    return cudaSuccess;
  struct emu_free_work *f = calloc(1, sizeof *f);
  if (!f)
    return cudaErrorMemoryAllocation;
  f->w.run = emu_free_run;
  f->p = p;
  emu_stream_enqueue(s, &f->w);
  return cudaSuccess;
}

/* ---- streams and events ---------------------------------------------- */

/* One priority level: CUDA clamps a requested priority into this range, so
 * every stream reports 0. */
EMU_API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
  if (least)
    *least = 0;
  if (greatest)
    *greatest = 0;
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
  (void)s;
  if (!priority)
    return cudaErrorInvalidValue;
  *priority = 0;
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
  if (!flags)
    return cudaErrorInvalidValue;
  struct CUstream_st *st = emu_stream_resolve(s);
  *flags = st ? st->flags : 0;
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
  if (!device)
    return cudaErrorInvalidValue;
  struct CUstream_st *st = emu_stream_resolve(s);
  *device = st ? st->device : emu_get_device();
  return cudaSuccess;
}

/* ---- function attributes (no occupancy: nothing runs on a device) ------ */

EMU_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
  if (!a || !func)
    return cudaErrorInvalidValue;
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  a->ptxVersion = a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = 48 << 10;
  return cudaSuccess;
}

EMU_API cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
  (void)attr;
  (void)value;
  return func ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

EMU_API cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache c)
{
  (void)c;
  return func ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

/* Per-thread-default-stream spellings. */
EMU_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
EMU_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s) { return cudaMallocAsync(p, size, s); }
EMU_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
EMU_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) { return cudaFreeAsync(p, s); }
EMU_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *priority);
EMU_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *priority) { return cudaStreamGetPriority(s, priority); }
EMU_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *flags);
EMU_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *flags) { return cudaStreamGetFlags(s, flags); }
