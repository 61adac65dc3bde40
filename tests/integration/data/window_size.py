# Prints the terminal's size, then again after a SIGWINCH, or after 20 s without one.
# SIGWINCH is blocked and waited for with sigtimedwait: a Python handler that set a
# threading.Event could deadlock, when it ran while the main thread held the Event's lock
# inside Event.wait (seen under load).
import os
import signal
import sys

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])
size = os.get_terminal_size(sys.stdout.fileno())
print(f"size {size.lines}x{size.columns}", flush=True)
signal.sigtimedwait([signal.SIGWINCH], 20)
size = os.get_terminal_size(sys.stdout.fileno())
print(f"now {size.lines}x{size.columns}", flush=True)
