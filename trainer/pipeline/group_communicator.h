// Sub-communicators of a world communicator (what MPI_Comm_split does), for the data-parallel
// all-reduce among the replicas of one pipeline stage.
#pragma once

#include "braid/braid.hpp"

namespace braid::trainer {

/// Collective over all of `world`: each rank joins the group `color` (0..colors-1) as rank `key`
/// (0..groupSize-1) of a new communicator of `groupSize` ranks; every group must be full.
/// World rank 0 serves a TCP rendezvous store for the creation only (its address, port and a
/// fresh job secret are broadcast over `world`); groups keep their keys apart with the store
/// prefix "pipeline-group-<color>". Returns after every group exists (a world barrier), so the
/// store may go. Throws braid::Error from the store or the creation (naming the rank and peer).
Communicator makeGroupCommunicator(Communicator& world, int color, int key, int groupSize);

}  // namespace braid::trainer
