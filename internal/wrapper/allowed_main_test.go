package wrapper

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/report"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// A Redis endpoint outside $LOCKEDCRON_REDIS_ALLOWED_HOSTS: lockwrap exits 70 with a
// clear message, before dialling it and without running the command.
func TestMainRefusesEndpointNotAllowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialled := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			dialled <- struct{}{}
			c.Close()
		}
	}()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	termLog := filepath.Join(dir, "termination-log")
	env := map[string]string{
		config.EnvRedisURL:          "redis://" + ln.Addr().String(),
		config.EnvRedisAllowedHosts: "*.redis.internal,10.0.0.0/8",
		config.EnvKey:               "k",
		config.EnvTerminationLog:    termLog,
	}
	var stderr bytes.Buffer
	code := Main([]string{"--", "touch", marker}, func(k string) string { return env[k] }, &stderr)
	if code != ExitInternal {
		t.Fatalf("exit %d, want %d; stderr %s", code, ExitInternal, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--redis-url") || !strings.Contains(stderr.String(), "is not in the allowed hosts") {
		t.Errorf("stderr %q", stderr.String())
	}
	raw, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != report.Error || !strings.Contains(rep.Message, "not in the allowed hosts") {
		t.Errorf("report %+v", rep)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
	select {
	case <-dialled:
		t.Error("the refused endpoint was dialled")
	default:
	}
}
