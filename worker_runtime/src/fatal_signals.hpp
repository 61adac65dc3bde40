#pragma once
/// Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): a handler, on an alternate signal
/// stack, that reports the signal on stderr and in the error file with async-signal-safe calls
/// only, then re-raises it under its previous disposition, so the process still dies of it.

namespace ddprun::detail {

/// Makes this process the one that writes the error file from the handlers, reads
/// TORCHELASTIC_ERROR_FILE, and installs the handlers (sigaction, SA_ONSTACK). Once per process.
void install_fatal_signal_handlers();

/// True in the process that called install_fatal_signal_handlers (not in a fork()ed child).
bool is_installer_process();

/// Gives the calling thread an alternate signal stack (released when the thread ends), so that a
/// stack overflow is reported too; keeps one someone else installed.
void install_alternate_stack();

/// A report must never turn a crash into a hang (a lock held by the crashed code, say, that
/// backtrace_symbols_fd's dladdr wants): arms alarm(2) with SIGALRM's default action, which ends
/// the process if the report takes too long.
void arm_watchdog();

/// Called by the terminate handler once it has reported: the SIGABRT of the abort() that follows
/// is no news, and is re-raised without a report.
void note_terminate_reported();

}  // namespace ddprun::detail
