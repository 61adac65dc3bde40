#include "launcher/report/exit_status.hpp"

#include <boost/system/system_error.hpp>
#include <filesystem>
#include <new>
#include <system_error>

#include "launcher/base/errors.hpp"
#include "rendezvous/error.hpp"

namespace ddprun::launcher {
namespace {

ExitReport job_failed(const std::string& text) { return {"ddprun: " + text + "\n", kExitJobFailed}; }

}  // namespace

ExitReport report_failure(std::exception_ptr failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const UsageError& error) {
    return {std::string("ddprun: error: ") + error.what() + " (see ddprun --help)\n", kExitUsage};
  } catch (const LaunchError& error) {
    return job_failed(error.what());
  } catch (const rendezvous::Error& error) {
    return job_failed(error.what());
  } catch (const std::filesystem::filesystem_error& error) {
    // The machine, not ddprun: a missing folder, a full disk, no permission.
    return job_failed(std::string(error.what()) + " (check that the folder exists, is writable and has room)");
  } catch (const boost::system::system_error& error) {  // Asio's: a socket or descriptor the system refused
    return job_failed(std::string(error.what()) + " (a system resource ran out or was refused: check ulimit -a)");
  } catch (const std::system_error& error) {
    return job_failed(std::string(error.what()) + " (a system resource ran out or was refused: check ulimit -a)");
  } catch (const std::bad_alloc&) {
    return job_failed("out of memory");
  } catch (const std::exception& error) {
    return job_failed(std::string("internal error: ") + error.what());
  } catch (...) {
    return job_failed("internal error: an exception that is not a std::exception");
  }
}

}  // namespace ddprun::launcher
