#include <cstdio>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cstdint>
__device__ __forceinline__ uint32_t back_cvt(uint32_t w) {
  uint32_t d;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(d) : "r"(w));
  return d;
}
__global__ void k(const float* in, float* out, int n) {
  int i = threadIdx.x;
  if (2 * i + 1 >= n) return;
  float a = in[2 * i], b = in[2 * i + 1];
  const __half2 v = __floats2half2_rn(a, b);
  uint32_t hi = static_cast<uint32_t>(__nv_cvt_halfraw2_to_fp8x2(static_cast<__half2_raw>(v), __NV_SATFINITE, __NV_E4M3));
  uint32_t back_bits = back_cvt(hi);
  const __half2 r = __hsub2(v, *reinterpret_cast<const __half2*>(&back_bits));
  uint32_t lo = static_cast<uint32_t>(__nv_cvt_halfraw2_to_fp8x2(static_cast<__half2_raw>(r), __NV_SATFINITE, __NV_E4M3));
  uint32_t lb = back_cvt(lo);
  __half2 hb = *reinterpret_cast<const __half2*>(&back_bits), lbh = *reinterpret_cast<const __half2*>(&lb);
  out[6 * i + 0] = __low2float(hb); out[6 * i + 1] = __high2float(hb);
  out[6 * i + 2] = __low2float(lbh); out[6 * i + 3] = __high2float(lbh);
  out[6 * i + 4] = (float)hi; out[6 * i + 5] = (float)lo;
}
int main() {
  const int n = 16;
  float h[n] = {1.1171875f, 3.0f, 447.0f, 300.5f, 0.3f, -17.25f, 100.125f, 0.0f, 255.9f, 1e-3f, 129.0f, -0.77f, 5.5f, 6.75f, 201.0f, 13.0f};
  float *din, *dout; cudaMalloc(&din, sizeof h); cudaMalloc(&dout, 6 * n / 2 * sizeof(float));
  cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice);
  k<<<1, n / 2>>>(din, dout, n);
  float o[6 * n / 2]; cudaMemcpy(o, dout, sizeof o, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n / 2; ++i)
    printf("a=%g b=%g | hi=(%g,%g) lo=(%g,%g) sum=(%g,%g) bits hi=%04x lo=%04x\n", h[2*i], h[2*i+1], o[6*i], o[6*i+1], o[6*i+2], o[6*i+3],
           o[6*i]+o[6*i+2], o[6*i+1]+o[6*i+3], (unsigned)o[6*i+4], (unsigned)o[6*i+5]);
}
