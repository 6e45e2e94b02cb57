package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockedcron/lockedcron/internal/lock"
	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// Main is lockwrap: args without the program name; it returns the exit code.
//
//	lockwrap cp DEST
//	lockwrap [flags] -- COMMAND [ARGS...]
//
// Main changes its process for good: it becomes non-dumpable, and before the command
// starts it becomes the reaper of every child (PID 1, else child subreaper). Call it only
// as a program's main.
func Main(args []string, getenv func(string) string, stderr io.Writer) (code int) {
	// A line lockwrap cannot write (its stderr a pipe whose reader has gone: a logger that
	// died) is lost, and nothing more: uncaught, SIGPIPE from a write to fd 1 or 2 ends a Go
	// program, and lockwrap died holding the lock, its ledger entry "running", no report.
	// Caught, not ignored: an ignored signal stays ignored across exec, in the command; a
	// caught one is back to its default there.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// First of all: the environment holds the Redis credentials, and the command (same
	// uid, no CAP_SYS_PTRACE) must not read them from /proc/<lockwrap>/environ.
	if err := makeNonDumpable(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintf(stderr, "lockwrap: prctl(PR_SET_DUMPABLE, 0): %v\n", err)
	}
	if len(args) > 0 && args[0] == "cp" {
		if len(args) < 2 || len(args) > 3 {
			fmt.Fprintln(stderr, "lockwrap: usage: lockwrap cp DEST [--protocol=N]")
			return ExitInternal
		}
		if len(args) == 3 {
			if err := checkProtocol(args[2]); err != nil {
				fmt.Fprintf(stderr, "lockwrap: cp: %v\n", err)
				return ExitInternal
			}
		}
		if err := CopySelf(args[1]); err != nil {
			fmt.Fprintf(stderr, "lockwrap: cp: %v\n", err)
			return ExitInternal
		}
		return 0
	}

	// go-redis's own log lines share the command's stderr: mark them as ours.
	redis.SetLogger(lock.Logger{Print: func(line string) { fmt.Fprintf(stderr, "lockwrap: %s\n", line) }})

	// Catch signals from the start, so that none of those a job is stopped or poked with
	// kills us without a report. Only these: notifying every signal also delivers the
	// runtime's preemption SIGURGs (hundreds of wake-ups per run).
	// They stay caught until the process exits: the report is written last, and a signal
	// after it (a kubelet's second SIGTERM) must not end lockwrap with a signal's status
	// instead of its exit code (signal.Stop there let it: TestPartitionAtTheEndThenSIGTERM).
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, forwardedSignals...)
	ignoreCrashSignals(stderr)

	cfg, cmd, err := config.Parse(args, getenv)
	rep := report.Report{Outcome: report.Error, Key: cfg.Key, Holder: cfg.Holder}
	if !cfg.Occurrence.IsZero() {
		rep.Occurrence = cfg.Occurrence.UTC().Format(time.RFC3339)
	}
	// The report is written on every path, panics included, but a refused second
	// lockwrap's: its termination log is the running one's.
	reportIsOurs := true
	defer func() {
		if p := recover(); p != nil {
			rep.Outcome = report.Error
			rep.Message = fmt.Sprintf("lockwrap panic: %v\n%s", p, debug.Stack())
			fmt.Fprintln(stderr, rep.Message)
			code = ExitInternal
		}
		if !reportIsOurs {
			return
		}
		if werr := WriteReport(cfg.TerminationLog, cfg.ReportMaxBytes, rep, stderr); werr != nil {
			fmt.Fprintf(stderr, "lockwrap: report: %v\n", werr)
		}
	}()
	if err != nil {
		rep.Message = err.Error()
		fmt.Fprintf(stderr, "lockwrap: %v\n", err)
		var ce *config.Error
		if errors.As(err, &ce) && (ce.Flag == "--help" || ce.Flag == "" || strings.HasSuffix(ce.Msg, "unknown flag")) {
			fmt.Fprint(stderr, config.Usage())
		}
		if n, limit, past := pastLimitFromEnv(args, getenv, stderr); past {
			rep.Message = notRunAgain(n, limit) + "; each start failed on its settings: " + err.Error()
			fmt.Fprintf(stderr, "lockwrap: %s\n", rep.Message)
			return 0
		}
		return ExitInternal
	}
	// One lockwrap of a holder at a time in a pod: a second one (run by the job, or
	// exec'd into the container) would take this run's live lock over.
	release, err := claimHolder(cfg.Holder, fmt.Sprintf("%s\x00%d\x00%s", cfg.Key, cfg.Occurrence.Unix(), cfg.RunID))
	defer release()
	switch {
	case errors.Is(err, ErrHolderRuns):
		// Said on stderr only: the termination log (inherited, or the default
		// /dev/termination-log) is the running lockwrap's, whose report a pod reads.
		reportIsOurs = false
		rep.Message = fmt.Sprintf("--holder %q: another lockwrap of this holder, key and occurrence runs in this pod (its network namespace): "+
			"this one would take that run's live lock over as a crashed run's, and record the occurrence as its own; nothing was done. "+
			"A lockwrap that a job's command runs inherits the holder, occurrence and key of the run it is part of: the step already runs under the lock, "+
			"so run it without lockwrap, or give this lockwrap a --key (and a --holder) of its own", cfg.Holder)
		fmt.Fprintf(stderr, "lockwrap: %s\n", rep.Message)
		return ExitInternal
	case err != nil:
		fmt.Fprintf(stderr, "lockwrap: warning: %v: a second lockwrap of holder %q in this pod would not be refused\n", err, cfg.Holder)
	}
	// Orphans the command leaves behind are ours to reap (as PID 1 nobody else would).
	if err := startReaping(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintf(stderr, "lockwrap: not reaping orphans: prctl(PR_SET_CHILD_SUBREAPER): %v\n", err)
	}
	// The report of a run whose command has exited exists from then on: lockwrap can be
	// ended before its final one (the kubelet SIGKILLs it at the end of the pod's grace,
	// whatever it is doing: seeking strays, recording the result), and a pod without a
	// report is counted an Error, its run reported by no one.
	exited := func(p report.Report) {
		if !provisionalReportFits(cfg.TerminationLog) {
			return
		}
		if werr := WriteReport(cfg.TerminationLog, cfg.ReportMaxBytes, p, stderr); werr != nil {
			fmt.Fprintf(stderr, "lockwrap: provisional report: %v\n", werr)
		}
	}
	rep, code = Run(context.Background(), cfg, cmd, Deps{Signals: sigs, Stderr: stderr, Exited: exited})
	return code
}

// provisionalReportFits reports whether a provisional report may be written at path before
// the final one: a file the final report overwrites (a regular one, or none yet), not a
// stream that would get both (stderr, a FIFO, a terminal).
func provisionalReportFits(path string) bool {
	if path == "" || path == "-" {
		return false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return fi.Mode().IsRegular()
}

// forwardedSignals are caught from the start and passed on to the command's process
// group once it runs (before, all but SIGWINCH abort the acquisition): the ones a
// runtime, supervisor or terminal sends to stop, reload or poke a job.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGWINCH,
}

// crashSignals are the signals the Go runtime ends a program for with a stack dump when
// they are sent to it and not caught. lockwrap's command could send them to PID 1, which
// lockwrap is in a pod (the kernel spares PID 1 only the signals it has no handler for,
// and the runtime handles these): lockwrap would die with its lock held, its ledger entry
// "running", and whatever the command wrote in the termination log as the report. A fault
// of lockwrap's own (a nil dereference: SIGSEGV from the kernel) still crashes it.
var crashSignals = append([]os.Signal{
	syscall.SIGABRT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS,
	syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV,
}, osCrashSignals...)

// ignoreCrashSignals catches crashSignals for good, telling each on stderr and otherwise
// ignoring it: they are not a request to stop (those are forwardedSignals), and passing
// them on would crash the command.
func ignoreCrashSignals(stderr io.Writer) {
	c := make(chan os.Signal, 8)
	signal.Notify(c, crashSignals...)
	go func() {
		for sig := range c {
			fmt.Fprintf(stderr, "lockwrap: ignored signal %v (sent to lockwrap; it neither stops a job nor is passed on)\n", sig)
		}
	}()
}

// WriteReport writes rep, encoded within limit bytes (report.EncodeWithin), to path: a
// file (created or truncated), "-" for stderr, "" for nowhere. The default
// /dev/termination-log is never created (the kubelet creates it; outside Kubernetes it is
// missing, which is not an error).
func WriteReport(path string, limit int, rep report.Report, stderr io.Writer) error {
	if path == "" {
		return nil
	}
	b, err := report.EncodeWithin(rep, limit)
	if err != nil {
		return err
	}
	if len(b) > report.MaxBytes {
		return fmt.Errorf("%d bytes, over %d", len(b), report.MaxBytes)
	}
	if path == "-" {
		_, err := fmt.Fprintf(stderr, "%s\n", b)
		return err
	}
	return writeReportFile(path, b, path != config.DefaultTerminationLog)
}

// writeReportFile truncates path and writes b; it creates path only when mayCreate, and a
// path it may not create that is missing is not an error.
//
// Nothing here may wait: opened without O_NONBLOCK, a FIFO the command left at
// --termination-log with no one reading it waited for a reader for ever, and lockwrap never
// exited. It is opened with O_NONBLOCK: a FIFO (or, through /dev/stderr, a pipe) without a
// reader is refused at the open (ENXIO, as a socket is); one with a reader is written
// within fifoWriteTimeout (through Go's poller, which waits for room and honours a
// deadline), else refused: its reader does not read. A regular file or a device
// (/dev/termination-log, a terminal) is written blocking, as before.
func writeReportFile(path string, b []byte, mayCreate bool) error {
	flag := os.O_WRONLY | os.O_TRUNC | syscall.O_NONBLOCK
	if mayCreate {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		if !mayCreate && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if errors.Is(err, syscall.ENXIO) {
			return fmt.Errorf("%s is a FIFO or pipe that no one reads, or a socket: not written (for stderr, --termination-log -)", path)
		}
		return err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.Mode()&os.ModeNamedPipe != 0:
		if err = f.SetWriteDeadline(time.Now().Add(fifoWriteTimeout)); errors.Is(err, os.ErrNoDeadline) {
			// Not in Go's poller (a FIFO on darwin): the descriptor stays non-blocking,
			// and a write with no room fails at once (EAGAIN).
			err = nil
		}
	case !fi.Mode().IsRegular() && fi.Mode()&os.ModeDevice == 0:
		err = fmt.Errorf("%s is not a regular file, a device or a FIFO: not written (for stderr, --termination-log -)", path)
	default:
		err = syscall.SetNonblock(int(f.Fd()), false) // a device's write may wait
	}
	if err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.EAGAIN) {
		err = fmt.Errorf("%s is a FIFO or pipe whose reader does not read: not written (for stderr, --termination-log -)", path)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fifoWriteTimeout bounds the report's write to a FIFO or pipe whose reader does not read.
const fifoWriteTimeout = time.Second

// CopySelf copies the running executable to dest (or dest/lockwrap when dest is a
// directory) with mode 0555, through a temporary file and a rename.
func CopySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, "lockwrap")
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".lockwrap-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// checkProtocol refuses to install this lockwrap in a pod whose controller gives it
// settings of a later version than it knows (arg: --protocol=N, config.Protocol): it
// would ignore them (a prepared pod's --not-before, the allowed Redis hosts …) and run
// the job all the same. That happens when a node keeps an older image under the tag the
// controller names. A lockwrap from before this check refuses any such argument (its cp
// takes DEST only), so it is refused too.
func checkProtocol(arg string) error {
	v, ok := strings.CutPrefix(arg, "--protocol=")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("%q: want --protocol=N, N a positive integer", arg)
	}
	if n > config.Protocol {
		return fmt.Errorf("this lockwrap knows the controller's settings up to version %d, and the controller that made this pod gives version %d: "+
			"the wrapper image is an older build (a node kept an older image under the same tag?); pin the image by digest (the chart's image.digest) "+
			"or have nodes pull it (--wrapper-image-pull-policy Always)", config.Protocol, n)
	}
	return nil
}
