// The NCCL types the shim is written against: its own copy (nccl_abi.h), or,
// for the build-time signature check, the CUDA toolkit's nccl.h. In the second
// case every definition in nccl_api.cc must match the toolkit's declaration,
// or the C++ compiler rejects two C functions of one name with different
// types.
#pragma once

#ifdef WEFT_NCCL_USE_TOOLKIT_HEADER
#include <nccl.h>
#else
#include "nccl/nccl_abi.h"
#endif
