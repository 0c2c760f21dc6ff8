// The CUDA runtime API on the emulated device (see include/cuda_runtime_api.h): memory through
// the arena of memory.h, copies that check their direction and their ranges, streams that are
// names, one or more identical devices (KILN_EMULATOR_DEVICES), CUDA's error codes and strings.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "cuda_emulator/emulator.h"
#include "cuda_emulator/include/cuda_runtime_api.h"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/runtime.h"
#include "cuda_emulator/settings.h"

struct CUstream_st {
  unsigned flags;
};

// An event: the host's steady clock when it was last recorded (every call is synchronous, so
// the work queued before it has run by then).
struct CUevent_st {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

namespace kiln::emulator {

namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
std::atomic<std::int64_t> host_waits{0};

void count_host_wait() { host_waits.fetch_add(1, std::memory_order_relaxed); }

std::set<cudaStream_t>& streams() {
  static auto* live = new std::set<cudaStream_t>;
  return *live;
}

std::set<cudaEvent_t>& events() {
  static auto* live = new std::set<cudaEvent_t>;
  return *live;
}

// Errors unless `event` was created and not destroyed (and, with `recorded`, has been recorded).
cudaError_t check_event(const char* call, cudaEvent_t event, bool recorded);

// cudaFuncAttributeMaxDynamicSharedMemorySize of each kernel that set it.
std::map<const void*, std::size_t>& dynamic_shared_limits() {
  static auto* limits = new std::map<const void*, std::size_t>;
  return *limits;
}

using Lock = std::lock_guard<std::recursive_mutex>;

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice:
      return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost:
      return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice:
      return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault:
      return "cudaMemcpyDefault";
  }
  return "an unknown cudaMemcpyKind";
}

// A failed call: its error becomes the last error too, as the runtime does.
cudaError_t failed(cudaError_t error, std::string detail) {
  set_last_error(error);
  return fail_call(error, std::move(detail));
}

cudaError_t copy(const char* call, void* dst, const void* src, std::size_t count,
                 cudaMemcpyKind kind, cudaStream_t stream) {
  const Lock lock(runtime_lock());
  if (!is_valid_stream(stream))
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("{}: {} is not a stream", call, hex(stream)));
  if (count == 0) return cudaSuccess;
  const bool dst_device = is_device_address(dst), src_device = is_device_address(src);
  bool want_dst = dst_device, want_src = src_device;
  switch (kind) {
    case cudaMemcpyHostToHost:
      want_dst = want_src = false;
      break;
    case cudaMemcpyHostToDevice:
      want_dst = true, want_src = false;
      break;
    case cudaMemcpyDeviceToHost:
      want_dst = false, want_src = true;
      break;
    case cudaMemcpyDeviceToDevice:
      want_dst = want_src = true;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return failed(cudaErrorInvalidMemcpyDirection,
                    fmt::format("{}: {} is not a cudaMemcpyKind", call, static_cast<int>(kind)));
  }
  const auto side = [](bool device) { return device ? "device memory" : "host memory"; };
  if (dst_device != want_dst)
    return failed(cudaErrorInvalidValue,
                  fmt::format("{}({} bytes, {}): the destination {} is {}", call, count,
                              kind_name(kind), hex(dst), side(dst_device)));
  if (src_device != want_src)
    return failed(cudaErrorInvalidValue,
                  fmt::format("{}({} bytes, {}): the source {} is {}", call, count, kind_name(kind),
                              hex(src), side(src_device)));
  for (auto [p, device, what] :
       {std::tuple{static_cast<const void*>(dst), dst_device, "destination"},
        std::tuple{src, src_device, "source"}}) {
    if (!device) continue;
    if (const auto problem = check_device_range(p, count))
      return failed(cudaErrorInvalidValue, fmt::format("{}({} bytes, {}): the {}: {}", call, count,
                                                       kind_name(kind), what, *problem));
  }
  const DeviceAccess access;
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t set(const char* call, void* ptr, int value, std::size_t count, cudaStream_t stream) {
  const Lock lock(runtime_lock());
  if (!is_valid_stream(stream))
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("{}: {} is not a stream", call, hex(stream)));
  if (count == 0) return cudaSuccess;
  if (const auto problem = check_device_range(ptr, count))
    return failed(cudaErrorInvalidValue, fmt::format("{}({} bytes): {}", call, count, *problem));
  const DeviceAccess access;
  std::memset(ptr, value, count);
  return cudaSuccess;
}

cudaError_t check_event(const char* call, cudaEvent_t event, bool recorded) {
  const Lock lock(runtime_lock());
  if (events().count(event) == 0)
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("{}: {} is not an event", call, hex(event)));
  if (recorded && !event->recorded)
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("{}: event {} was never recorded", call, hex(event)));
  return cudaSuccess;
}

}  // namespace

bool is_valid_stream(cudaStream_t stream) {
  const Lock lock(runtime_lock());
  return stream == nullptr || streams().count(stream) == 1;
}

void set_last_error(cudaError_t error) { last_error = error; }

std::size_t max_dynamic_shared_bytes(const void* function) {
  const Lock lock(runtime_lock());
  const auto found = dynamic_shared_limits().find(function);
  return found == dynamic_shared_limits().end() ? kDefaultDynamicShared : found->second;
}

void set_memory_limit(std::size_t bytes) {
  const Lock lock(runtime_lock());
  set_device_memory_limit(bytes);
}

std::size_t memory_limit() {
  const Lock lock(runtime_lock());
  return device_memory_limit();
}

std::size_t bytes_allocated() {
  const Lock lock(runtime_lock());
  return device_bytes_allocated();
}

std::int64_t host_synchronizations() { return host_waits.load(std::memory_order_relaxed); }

bool uses_protection_keys() {
  const Lock lock(runtime_lock());
  return device_uses_protection_keys();
}

}  // namespace kiln::emulator

using namespace kiln::emulator;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return failed(cudaErrorInvalidValue, "cudaGetDeviceCount: count is null");
  *count = settings().devices;
  if (*count == 0) return failed(cudaErrorNoDevice, "KILN_EMULATOR_DEVICES=0");
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= settings().devices)
    return failed(cudaErrorInvalidDevice,
                  fmt::format("cudaSetDevice({}): the emulator has {} device(s)", device,
                              settings().devices));
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return failed(cudaErrorInvalidValue, "cudaGetDevice: device is null");
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr || device < 0 || device >= settings().devices)
    return failed(cudaErrorInvalidDevice,
                  fmt::format("cudaGetDeviceProperties: no device {}", device));
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "kiln CUDA emulator (CPU, test-only)");
  prop->totalGlobalMem = memory_limit();
  prop->sharedMemPerBlock = 48 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = 1;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  if (free == nullptr || total == nullptr)
    return failed(cudaErrorInvalidValue, "cudaMemGetInfo: a null pointer");
  const Lock lock(runtime_lock());
  *total = device_memory_limit();
  *free = *total - std::min(*total, device_bytes_allocated());
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  count_host_wait();
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t size) {
  if (ptr == nullptr) return failed(cudaErrorInvalidValue, "cudaMalloc: ptr is null");
  const Lock lock(runtime_lock());
  *ptr = device_malloc(size);
  if (*ptr == nullptr)
    return failed(cudaErrorMemoryAllocation,
                  fmt::format("cudaMalloc({}): {} of the emulated device's {} bytes are allocated",
                              size, device_bytes_allocated(), device_memory_limit()));
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const Lock lock(runtime_lock());
  std::string problem;
  if (!device_free(ptr, &problem))
    return failed(cudaErrorInvalidValue, fmt::format("cudaFree: {}", problem));
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
  count_host_wait();
  return copy("cudaMemcpy", dst, src, count, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (kind == cudaMemcpyDeviceToHost) count_host_wait();
  return copy("cudaMemcpyAsync", dst, src, count, kind, stream);
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t count) {
  return set("cudaMemset", ptr, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream) {
  return set("cudaMemsetAsync", ptr, value, count, stream);
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  const Lock lock(runtime_lock());
  if (func == nullptr)
    return failed(cudaErrorInvalidValue, "cudaFuncSetAttribute: the function is null");
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return failed(cudaErrorInvalidValue,
                  fmt::format("cudaFuncSetAttribute: attribute {} is not emulated (only "
                              "cudaFuncAttributeMaxDynamicSharedMemorySize)",
                              static_cast<int>(attr)));
  if (value < 0 || static_cast<std::size_t>(value) > kMaxDynamicSharedOptIn)
    return failed(cudaErrorInvalidValue,
                  fmt::format("cudaFuncSetAttribute: {} bytes of dynamic shared memory is outside "
                              "0 to {} (sm_90's shared memory per block with the opt-in)",
                              value, kMaxDynamicSharedOptIn));
  dynamic_shared_limits()[func] = static_cast<std::size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr || func == nullptr)
    return failed(cudaErrorInvalidValue, "cudaFuncGetAttributes: a null argument");
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = 1024;
  attr->ptxVersion = attr->binaryVersion = 90;
  attr->maxDynamicSharedSizeBytes = static_cast<int>(max_dynamic_shared_bytes(func));
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (stream == nullptr) return failed(cudaErrorInvalidValue, "cudaStreamCreate: stream is null");
  const Lock lock(runtime_lock());
  *stream = new CUstream_st{flags};
  streams().insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  const Lock lock(runtime_lock());
  if (stream == nullptr || streams().erase(stream) == 0)
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("cudaStreamDestroy: {} is not a stream", hex(stream)));
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!is_valid_stream(stream))
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("cudaStreamSynchronize: {} is not a stream", hex(stream)));
  count_host_wait();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return failed(cudaErrorInvalidValue, "cudaEventCreate: event is null");
  const Lock lock(runtime_lock());
  *event = new CUevent_st;
  events().insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (const cudaError_t error = check_event("cudaEventDestroy", event, false); error != cudaSuccess)
    return error;
  const Lock lock(runtime_lock());
  events().erase(event);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t error = check_event("cudaEventRecord", event, false); error != cudaSuccess)
    return error;
  if (!is_valid_stream(stream))
    return failed(cudaErrorInvalidResourceHandle,
                  fmt::format("cudaEventRecord: {} is not a stream", hex(stream)));
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return check_event("cudaEventQuery", event, true); }

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t error = check_event("cudaEventSynchronize", event, true);
      error != cudaSuccess)
    return error;
  count_host_wait();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return failed(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is null");
  for (cudaEvent_t event : {start, end})
    if (const cudaError_t error = check_event("cudaEventElapsedTime", event, true);
        error != cudaSuccess)
      return error;
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorString(cudaError_t error) {
  const char* text = "unrecognized error code";
  switch (error) {
    case cudaSuccess:
      text = "no error";
      break;
    case cudaErrorInvalidValue:
      text = "invalid argument";
      break;
    case cudaErrorMemoryAllocation:
      text = "out of memory";
      break;
    case cudaErrorInitializationError:
      text = "initialization error";
      break;
    case cudaErrorInvalidConfiguration:
      text = "invalid configuration argument";
      break;
    case cudaErrorInvalidMemcpyDirection:
      text = "invalid copy direction for memcpy";
      break;
    case cudaErrorNoDevice:
      text = "no CUDA-capable device is detected";
      break;
    case cudaErrorInvalidDevice:
      text = "invalid device ordinal";
      break;
    case cudaErrorInvalidResourceHandle:
      text = "invalid resource handle";
      break;
    case cudaErrorNotReady:
      text = "device not ready";
      break;
    case cudaErrorIllegalAddress:
      text = "an illegal memory access was encountered";
      break;
    case cudaErrorLaunchFailure:
      text = "unspecified launch failure";
      break;
  }
  const std::string& detail = error_detail(error);
  if (detail.empty()) return text;
  thread_local std::string with_detail;
  with_detail = fmt::format("{} (emulator: {})", text, detail);
  return with_detail.c_str();
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

}  // extern "C"
