//go:build soak

package soak

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// keepManagerLogs copies the operator's container logs from the node's pod log folder
// (the kubelet's /var/log/pods: the soak runs on the node) into dir, once a second,
// until ctx ends: a deleted operator pod takes its log with it, and the soak deletes
// operator pods on purpose. Each pod's log is kept under its folder's name
// (namespace_pod_uid). What a pod wrote in its last second before deletion may be lost.
func keepManagerLogs(ctx context.Context, podLogs, dir string) {
	offsets := map[string]int64{}
	copyNew := func() {
		files, _ := filepath.Glob(filepath.Join(podLogs, "lockedcron-system_*", "*", "*.log"))
		for _, f := range files {
			rel, _ := filepath.Rel(podLogs, f)
			dst := filepath.Join(dir, strings.ReplaceAll(rel, string(filepath.Separator), "__"))
			offsets[f] = appendFrom(f, dst, offsets[f])
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			copyNew()
			return
		case <-t.C:
			copyNew()
		}
	}
}

// appendFrom appends src's bytes from off on to dst and returns the new offset.
func appendFrom(src, dst string, off int64) int64 {
	in, err := os.Open(src)
	if err != nil {
		return off
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || st.Size() <= off {
		return off
	}
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return off
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return off
	}
	defer out.Close()
	n, _ := io.Copy(out, in)
	return off + n
}
