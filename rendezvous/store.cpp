#include "rendezvous/store.hpp"

namespace ddprun::rendezvous {

Task<std::vector<std::optional<std::string>>> Store::get_if_present(std::vector<std::string> keys) {
  std::vector<std::optional<std::string>> values(keys.size());
  if (keys.empty()) co_return values;
  // Present keys are read at once: the timeouts below only bound a store that stops answering.
  constexpr std::chrono::milliseconds kRead{std::chrono::seconds(10)};
  if (co_await check(keys)) {
    std::vector<std::string> all = co_await multi_get(keys, kRead);
    for (std::size_t i = 0; i < all.size() && i < values.size(); ++i) values[i] = std::move(all[i]);
    co_return values;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::vector<std::string> one(1, keys[i]);  // a braced list in co_await trips g++ 12
    if (co_await check(std::move(one))) values[i] = co_await get(keys[i], kRead);
  }
  co_return values;
}

Task<void> Store::connect() { co_return; }

}  // namespace ddprun::rendezvous
