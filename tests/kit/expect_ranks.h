// What ranks as threads (tests/kit/communicators.h) threw, checked under gtest.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <vector>

#include "tests/kit/threads.h"

namespace braid::testing {

/// Expects that no rank threw, naming each rank that did and its message.
inline void expectNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

}  // namespace braid::testing
