package wrapper

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// strayRounds bounds killStrays: a round finds the marked processes and kills them, the
// next finds those they forked meanwhile; killed ones are zombies, whose environment reads
// empty.
const (
	strayRounds = 200
	strayPause  = 5 * time.Millisecond
)

// killStrays kills (SIGKILL) every process but this one whose environment holds mark (an
// "EnvRunMark=value" entry), until a look finds none: the command's processes that left its
// process group and session (setsid, a daemon's double fork), and all they started, unless
// they emptied their environment (then they are the command's own doing). A process this
// user may not read the environment of is not this run's (lockwrap's user started it).
func killStrays(mark string) {
	needle := []byte("\x00" + mark + "\x00")
	self := os.Getpid()
	for range strayRounds {
		dirs, err := filepath.Glob("/proc/[0-9]*")
		if err != nil {
			return
		}
		found := 0
		buf := []byte{0}
		for _, d := range dirs {
			pid, err := strconv.Atoi(filepath.Base(d))
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile(d + "/environ")
			if err != nil {
				continue // gone, or not ours
			}
			buf = append(buf[:1], env...)
			if bytes.Contains(buf, needle) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				found++
			}
		}
		if found == 0 {
			return
		}
		time.Sleep(strayPause) // for the killed to die (a zombie's environment reads empty)
	}
}
