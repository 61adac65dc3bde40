# Prints the terminal's size, then again after each SIGWINCH (up to one), or after 20 s without one.
import os
import signal
import sys
import threading

changed = threading.Event()
signal.signal(signal.SIGWINCH, lambda signo, frame: changed.set())
size = os.get_terminal_size(sys.stdout.fileno())
print(f"size {size.lines}x{size.columns}", flush=True)
changed.wait(20)
size = os.get_terminal_size(sys.stdout.fileno())
print(f"now {size.lines}x{size.columns}", flush=True)
