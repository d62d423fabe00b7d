#include "transport/ofi/wire.h"

#include <fmt/format.h>

namespace braid::transport::ofi {

std::string encodePublished(const Published& p) {
  return fmt::format("{}|{}|{}|{}", p.provider, p.path, p.where,
                     toHex(p.address.data(), p.address.size()));
}

std::optional<Published> decodePublished(const std::string& text, std::string* why) {
  // The provider may hold no '|'; the address is last.
  const size_t bar1 = text.find('|');
  const size_t bar2 = bar1 == std::string::npos ? bar1 : text.find('|', bar1 + 1);
  const size_t bar3 = bar2 == std::string::npos ? bar2 : text.find('|', bar2 + 1);
  Published out;
  if (bar3 == std::string::npos || bar1 == 0 || !fromHex(text.substr(bar3 + 1), &out.address)) {
    *why = fmt::format("'{}' is not <provider>|<path>|<host>|<address hex>", text.substr(0, 200));
    return std::nullopt;
  }
  out.provider = text.substr(0, bar1);
  out.path = text.substr(bar1 + 1, bar2 - bar1 - 1);
  out.where = text.substr(bar2 + 1, bar3 - bar2 - 1);
  return out;
}

}  // namespace braid::transport::ofi
