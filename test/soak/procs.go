package soak

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	wrapcfg "github.com/lockedcron/lockedcron/internal/wrapper/config"
	"github.com/lockedcron/lockedcron/test/soak/checker"
)

// runOfProcess names the run of key a live job process belongs to, from the environment lockwrap
// gave it; an error when the process has exited (gone, or a zombie its lockwrap has not
// reaped) or its environment does not name its run.
func runOfProcess(pid int, key string) (checker.Kill, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return checker.Kill{}, err
	}
	// The state follows the command's closing parenthesis: "pid (comm) S …".
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return checker.Kill{}, fmt.Errorf("exited (stat %q)", stat)
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return checker.Kill{}, err
	}
	run := checker.Kill{Key: key}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case wrapcfg.EnvHolder:
			run.Holder = v
		case wrapcfg.EnvOccurrence:
			run.Occurrence, _ = time.Parse(time.RFC3339, v)
		}
	}
	if run.Holder == "" || run.Occurrence.IsZero() {
		return checker.Kill{}, fmt.Errorf("its environment has no %s or %s", wrapcfg.EnvHolder, wrapcfg.EnvOccurrence)
	}
	return run, nil
}
