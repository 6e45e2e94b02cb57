// Package promtest runs a real Prometheus server (the Debian package's `prometheus`,
// installed by hack/install-deps.sh) for tests: the controller's alert test against the
// manager in envtest and the e2e monitoring spec against the deployed operator.
package promtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Server is a running prometheus.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL    string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start writes config as dir/prometheus.yml and runs bin (default "prometheus") in dir
// on a free loopback port, with its data in dir/data and its log in dir/prometheus.log.
// Files the config names (rule files, tokens) are read relative to dir.
func Start(bin, dir, config string) (*Server, error) {
	if bin == "" {
		bin = "prometheus"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found: run hack/install-deps.sh (Debian package prometheus): %w", bin, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, log: filepath.Join(dir, "prometheus.log"), exited: make(chan struct{})}
	log, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s.cmd = exec.Command(path, "--config.file=prometheus.yml", "--storage.tsdb.path=data", "--web.listen-address="+addr)
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, log, log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	return s, nil
}

// Stop ends the server: SIGTERM, then SIGKILL after 15 s.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Log is what the server wrote to its log so far (for a failed test's output).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}
