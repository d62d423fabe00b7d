// The braid_torch._C extension: the creator PyTorch calls for init_process_group("braid").
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include "process_group.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "braid's PyTorch distributed backend (import braid_torch to register it)";
  m.def("create_process_group", &braid::pytorch::BraidProcessGroup::create, pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("world_size"), pybind11::arg("timeout"),
        // The rendezvous blocks on the other ranks: let other Python threads run meanwhile.
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Makes a braid process group over `store` (c10d's rendezvous) for `rank` of "
        "`world_size`; `timeout` (timedelta) becomes braid's timeout.");
  m.attr("built_with_torch") = TORCH_VERSION;
}
