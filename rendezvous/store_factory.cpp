#include "rendezvous/store_factory.hpp"

#include "rendezvous/async_store_client.hpp"

namespace ddprun::rendezvous {

StoreFactory tcp_store_factory(Endpoint store, std::optional<std::string> token) {
  StoreFactory factory;
  factory.address = format_endpoint(store.host, store.port);
  factory.open = [store, token](boost::asio::any_io_executor executor, std::chrono::milliseconds connect_timeout,
                                std::chrono::milliseconds timeout) -> std::unique_ptr<Store> {
    StoreClientOptions options;
    options.host = store.host;
    options.port = store.port;
    options.connect_timeout = connect_timeout;
    options.timeout = timeout;
    options.token = token;
    return std::make_unique<AsyncStoreClient>(executor, options);
  };
  return factory;
}

}  // namespace ddprun::rendezvous
