package wrapper

// ReaperActive reports whether this process has become a reaper (startReaping): a test
// binary must not. Its reaper would collect every child of the binary (a test's
// redis-server among them), and the look for a run's processes, run in-process, would take
// every descendant of the binary for the run's.
func ReaperActive() bool { return currentReaper() != nil }
