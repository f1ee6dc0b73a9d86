// How the shim defines an exported NCCL function: the definition is pncclX,
// and ncclX is a weak alias of it (NCCL's own arrangement, which lets a
// profiling library interpose ncclX and forward to pncclX).
#pragma once

#define NCCL_API(ret, name, ...)                                                                   \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                      \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" ret p##name(__VA_ARGS__)
