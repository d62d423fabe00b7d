// How nccl/ exports a call: NCCL's name (defined here, extern "C") and its profiling alias
// pnccl<Name>, which names the same code (a profiler that interposes nccl<Name> calls on through
// pnccl<Name>, as with NCCL). The version script (exports.map) exports these two families only.
#pragma once

#include "nccl.h"

/// After the definition of `name` in the same file: defines p<name> as an alias of it.
#define BRAID_NCCL_ALIAS(name) \
  extern "C" __attribute__((alias(#name))) decltype(name) p##name;
