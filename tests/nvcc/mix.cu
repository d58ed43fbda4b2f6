// mix.cu -- an NCCL program with kernels of its own, as every real client
// has: kernels before, between and after collectives on the same streams,
// events between streams, one process driving all devices (ncclCommInitAll).
// Built by nvcc with `-cudart shared`; on the CPU emulator the kernels are
// stream-ordered no-ops, so the data the program checks is set by copies
// and moved by NCCL only.  Prints one line per device and "mix ok".
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nccl.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); exit(1); } } while (0)

__global__ void fill(float *x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
__global__ void scale(float *x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= a;
}

int main() {
  const int ndev = 2, n = 1024;
  int devs[ndev] = {0, 1};
  ncclComm_t comms[ndev];
  cudaStream_t s[ndev], side[ndev];
  cudaEvent_t ev[ndev];
  float *buf[ndev];
  NK(ncclCommInitAll(comms, ndev, devs));
  for (int d = 0; d < ndev; d++) {
    CK(cudaSetDevice(d));
    CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    CK(cudaStreamCreate(&side[d]));
    CK(cudaEventCreateWithFlags(&ev[d], cudaEventDisableTiming));
    CK(cudaMalloc(&buf[d], n * sizeof(float)));
    float host[n];
    for (int i = 0; i < n; i++) host[i] = (float)(d + 1);
    CK(cudaMemcpy(buf[d], host, sizeof host, cudaMemcpyHostToDevice));
    fill<<<(n + 255) / 256, 256, 0, side[d]>>>(buf[d], (float)(d + 1), 0);  // n = 0: writes nothing
    CK(cudaGetLastError());
    CK(cudaEventRecord(ev[d], side[d]));
    CK(cudaStreamWaitEvent(s[d], ev[d], 0));
  }
  for (int step = 0; step < 3; step++) {
    NK(ncclGroupStart());
    for (int d = 0; d < ndev; d++) {
      CK(cudaSetDevice(d));
      scale<<<4, 128, 0, s[d]>>>(buf[d], 1.0f, n);
      NK(ncclAllReduce(buf[d], buf[d], n, ncclFloat, ncclSum, comms[d], s[d]));
    }
    NK(ncclGroupEnd());
  }
  for (int d = 0; d < ndev; d++) {
    CK(cudaSetDevice(d));
    scale<<<1, 32, 0, s[d]>>>(buf[d], 1.0f, n);
    CK(cudaStreamSynchronize(s[d]));
    float host[n];
    CK(cudaMemcpy(host, buf[d], sizeof host, cudaMemcpyDeviceToHost));
    // 1 + 2 = 3, then 6, then 12: three in-place sums over two devices
    int bad = 0;
    for (int i = 0; i < n; i++) bad += host[i] != 12.0f;
    printf("device %d: %s (x[0] = %g)\n", d, bad ? "WRONG" : "ok", host[0]);
    if (bad) return 1;
  }
  for (int d = 0; d < ndev; d++) NK(ncclCommDestroy(comms[d]));
  printf("mix ok\n");
  return 0;
}
