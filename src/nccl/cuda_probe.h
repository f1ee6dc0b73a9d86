// Is a pointer GPU memory? Asked of the CUDA driver (libcuda.so.1) only when
// the program has loaded it already: dlopen(RTLD_NOLOAD), never a hard
// dependency and never a CUDA initialisation on the shim's part. A program
// that has not loaded CUDA cannot hold device pointers.
#pragma once

namespace weft::nccl {

enum class MemKind { Host, Device };

// Looks for a loaded libcuda.so.1 (again); cheap once found. Called at
// communicator init, when NCCL programs have already set their device.
void probeCuda();
// Host for plain, pinned and managed memory (the CPU can touch all three);
// Device for cudaMalloc'd memory.
MemKind classify(const void* p);
// The device of the current CUDA context, or -1 (no CUDA, no context).
int currentCudaDevice();

}  // namespace weft::nccl
