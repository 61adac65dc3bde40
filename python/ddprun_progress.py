"""Progress from a Python worker to ddprun: its step, samples and a short text, in ddprun's status.

    import ddprun_progress

    for step, batch in enumerate(loader):
        train_step(batch)
        ddprun_progress.report(step, (step + 1) * batch_size)          # or, with a text:
        ddprun_progress.report(step, (step + 1) * batch_size, f"loss {loss:.3f}")

ddprun puts this module on its workers' PYTHONPATH, so a script started by ddprun imports it with no
installation and no dependency. Started otherwise (DDPRUN_PROGRESS_FILE unset), report() does
nothing, so a script keeps working without ddprun.

It writes the worker's progress file, DDPRUN_PROGRESS_FILE, with the layout and the seqlock that
common/progress_layout.hpp of ddprun's sources defines (version 1), as ddprun's C++ writer does (a
test, tests/runtime/progress_layout_test.cpp, runs both and compares the bytes). The file is mapped
once, at the first report, and each report is a few stores into the mapping; no system call,
nothing sent, nothing that can block. A report equal to the last one writes nothing.

report() never raises into training: if the file cannot be opened or a value cannot be written (a
step that is not an integer), it says so once on stderr and does nothing from then on. A process
forked from the worker (a DataLoader worker) does not write its parent's file.

Store order: the seqlock needs the sequence's odd store to be seen before the fields and the fields
before its even store. On x86-64 stores are seen in program order; CPython has no fence, so on a
weakly ordered CPU (AArch64) a reader may, rarely, see one snapshot mixing two reports.
"""
import mmap as _mmap
import os as _os
import sys as _sys
import time as _time

__all__ = ["report", "enabled"]

# The file, version 1 (offsets in bytes; common/progress_layout.hpp defines them, a test holds this to it).
_MAGIC = 0x3147525052504444  # "DDPRPRG1" as little-endian bytes
_VERSION = 1
_SIZE = 512
_MAX_TEXT = 256
_TEXT_AT = 64
# In 8-byte words: sequence 3, step 4, samples 5, timestamp 6. In 4-byte words: version 2, size 3,
# pid 4, text_length 14 (report() writes them as literals).
_SEQUENCE = 3
_VERSION_U32, _SIZE_U32, _PID_U32 = 2, 3, 4

# CLOCK_MONOTONIC_COARSE, which the vDSO serves without a system call (the time module of 3.11 does
# not name it; 6 is its number on Linux).
_COARSE = getattr(_time, "CLOCK_MONOTONIC_COARSE", 6)


def _clip(text):
    """`text` as UTF-8, at most _MAX_TEXT bytes, never cutting a character in two."""
    if not isinstance(text, str):
        text = str(text)
    data = text.encode("utf-8", "replace")
    if len(data) <= _MAX_TEXT:
        return data
    cut = _MAX_TEXT
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def _say(message):
    try:
        _sys.stderr.write("ddprun_progress: progress reports are off: %s\n" % (message,))
        _sys.stderr.flush()
    except Exception:
        pass


def _map(path):
    """Maps `path` (created, grown to _SIZE when shorter) and stamps its header, as the C++ writer."""
    fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_CLOEXEC, 0o644)
    try:
        if _os.fstat(fd).st_size < _SIZE:
            _os.ftruncate(fd, _SIZE)
        memory = _mmap.mmap(fd, _SIZE, _mmap.MAP_SHARED, _mmap.PROT_READ | _mmap.PROT_WRITE)
    finally:
        _os.close(fd)  # the mapping keeps the file
    view = memoryview(memory)
    words = view.cast("q")
    halves = view.cast("I")
    halves[_VERSION_U32] = _VERSION
    halves[_SIZE_U32] = _SIZE
    halves[_PID_U32] = _os.getpid()
    # A previous writer that died in the middle of a write left the sequence odd; this process is
    # the only writer now.
    if words[_SEQUENCE] % 2:
        words[_SEQUENCE] += 1
    # Last: a reader that sees the magic sees the header.
    view.cast("Q")[0] = _MAGIC
    return memory, words, halves, view[_TEXT_AT:_TEXT_AT + _MAX_TEXT]


def _make_report(path):
    """report() for the file at `path`: a closure, so that its state is read as fast as CPython
    reads anything (cells, no attribute or global lookups on the way)."""
    unset = object()
    last_step = last_samples = last_text = unset  # the first report always publishes
    words = halves = text_area = None  # mapped at the first report
    keep = None  # the mmap object, so that the mapping lives as long as this closure
    sequence = 0
    dead = False
    clock = _time.clock_gettime_ns
    coarse = _COARSE

    def open_now():
        nonlocal keep, words, halves, text_area, sequence, dead
        if words is None and not dead:
            try:
                keep, words, halves, text_area = _map(path)
                sequence = words[_SEQUENCE]
            except Exception as error:
                give_up("%s: %s" % (path, error))
        return words is not None

    def give_up(why):
        nonlocal dead, words
        words = None
        if not dead:  # said once
            dead = True
            _say(why)

    def report(step, samples, text=None):
        """Publishes `step` and `samples` (integers) and `text` (replaces the last one; None clears
        it) to ddprun. Nothing happens when they equal the last report's, or without ddprun."""
        nonlocal last_step, last_samples, last_text, sequence
        try:
            if step == last_step and samples == last_samples and text == last_text:
                return
            if words is None and not open_now():
                return
            # Everything that may fail or call out is done before the write begins.
            if text == last_text and last_text is not unset:
                data = None
            else:
                data = b"" if text is None else _clip(text)
            now = clock(coarse)
        except Exception as error:  # a value that cannot be compared or turned into text
            return give_up("cannot report %r, %r, %r: %s" % (step, samples, text, error))
        odd = sequence + 1
        # The write: subscript stores only, no call, so no other thread of this process runs in
        # the middle (CPython switches threads at calls and loops). Indices as literals (a constant
        # is the cheapest load): 3 sequence, 4 step, 5 samples, 6 timestamp; 14 text_length (u32).
        try:
            words[3] = odd
            words[4] = step
            words[5] = samples
            words[6] = now
            if data is not None:
                halves[14] = len(data)
                text_area[:len(data)] = data
            words[3] = odd + 1
        except Exception as error:
            # Not an int64 (a float, a string): the fields as they were, the sequence even again.
            try:
                words[4] = 0 if last_step is unset else last_step
                words[5] = 0 if last_samples is unset else last_samples
            except Exception:
                pass
            words[3] = odd + 1
            sequence = odd + 1
            return give_up("step and samples must be integers: %r, %r (%s)" % (step, samples, error))
        sequence = odd + 1
        last_step = step
        last_samples = samples
        last_text = text

    def forked():
        # Only one process writes a file: a child of the worker (a DataLoader worker, a fork for a
        # subprocess) reports nothing to its parent's.
        nonlocal dead, words
        dead = True
        words = None

    _os.register_at_fork(after_in_child=forked)
    report.open_now = open_now
    return report


def _nothing(step, samples, text=None):
    """Started without ddprun (DDPRUN_PROGRESS_FILE unset): reports go nowhere."""
    return None


def _deferred(step, samples, text=None):
    """report() of a module imported by a --preload interpreter (ddprun_warm.py) before its worker's
    environment arrived: the file is known at the first report (or when ddprun_warm calls _resolve()
    as the worker starts). A caller that imported this function itself goes through it each time."""
    return _resolve()(step, samples, text)


def _resolve():
    """report() from DDPRUN_PROGRESS_FILE as it is now, made once."""
    global _PATH, report
    if report is _deferred:
        _PATH = _os.environ.get("DDPRUN_PROGRESS_FILE", "")
        report = _make_report(_PATH) if _PATH else _nothing
    return report


_PATH = ""
report = _deferred
if not getattr(_sys.modules.get("ddprun_warm"), "preloading", False):
    _resolve()


def enabled():
    """Whether report() publishes to ddprun: DDPRUN_PROGRESS_FILE set and its file mapped (mapped
    now when it was not yet)."""
    current = _resolve()
    return current is not _nothing and current.open_now()
