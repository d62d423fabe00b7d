// The rendezvous store ranks use to find each other: the one header of comm/bootstrap/ for the
// rest of braid (users see braid/store.hpp: the abstract Store and factories for these).
//
// A Store is a small key-value map shared by all ranks of a job: set/get (get blocks until the
// key exists), add (an atomic counter) and wait (for several keys). InMemoryStore serves ranks
// that are threads of one process; StoreServer + TcpStore serve ranks that are processes (rank 0,
// or the process that made a unique id, runs the server; every rank, rank 0 included, connects a
// TcpStore to it). Every connection proves it belongs to the job with a handshake (magic,
// protocol version, world size and the job secret); every message is length-checked; every call
// has a deadline. Strangers who reach the port cannot lock the ranks out (server.h, lobby.h), and
// a rank that is turned away before its handshake retries until its deadline (tcp_store.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/bootstrap/address.h"
#include "comm/bootstrap/memory_store.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/server.h"
#include "comm/bootstrap/store_base.h"
#include "comm/bootstrap/tcp_store.h"
