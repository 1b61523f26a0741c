// cudaStream_t without the CUDA headers: launcher headers take a stream, and
// the engine's plain C++ files include them. This is the same declaration
// driver_types.h makes (a pointer to the opaque CUstream_st), so both may meet
// in one translation unit.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
