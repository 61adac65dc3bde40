import faulthandler, signal, sys, threading, time
f = open("/tmp/hb/fh_threads.txt", "a")
faulthandler.register(signal.SIGRTMAX - 3, file=f, all_threads=True, chain=False)
def worker():
    time.sleep(60)
t = threading.Thread(target=worker, daemon=True); t.start()
def inner():
    time.sleep(60)
inner()
