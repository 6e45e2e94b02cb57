// Command imagebuild writes a container image tarball (docker-archive, which
// `ctr images import` and `docker load` both read) made of static binaries,
// without a Docker daemon or a registry:
//
//	go run ./hack/imagebuild --name k8s.local/lockedcron:dev --out lockedcron.tar \
//	    --file bin/manager=/manager --file bin/lockwrap=/lockwrap \
//	    --entrypoint /manager --user 65532
//
// The image is empty.Image plus one layer holding the given files (mode 0755 unless
// --file-mode says otherwise), /tmp (1777) and any --dir. Timestamps are fixed, so the
// same inputs give the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var files, dirs, entrypoint, cmd, env, labels multi
	imgName := fs.String("name", "", "image reference, e.g. k8s.local/lockedcron:dev (required)")
	out := fs.String("out", "", "output tarball path (required)")
	user := fs.String("user", "65532:65532", "user (and group) the image runs as")
	workdir := fs.String("workdir", "/", "working directory")
	arch := fs.String("arch", runtime.GOARCH, "image architecture")
	fs.Var(&files, "file", "SRC=DEST: put host file SRC at DEST in the image, mode 0755 (repeatable)")
	fs.Var(&dirs, "dir", "an empty directory to create in the image (repeatable)")
	fs.Var(&entrypoint, "entrypoint", "entrypoint element (repeatable, in order)")
	fs.Var(&cmd, "cmd", "cmd element (repeatable, in order)")
	fs.Var(&env, "env", "K=V environment entry (repeatable)")
	fs.Var(&labels, "label", "K=V label (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *imgName == "" || *out == "" || len(files) == 0 {
		fs.Usage()
		return fmt.Errorf("--name, --out and at least one --file are required")
	}
	tag, err := name.NewTag(*imgName, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("bad --name: %w", err)
	}

	layerTar, err := buildLayer(files, dirs)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture = *arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.User = *user
	cf.Config.WorkingDir = *workdir
	cf.Config.Entrypoint = entrypoint
	cf.Config.Cmd = cmd
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	if len(labels) > 0 {
		cf.Config.Labels = map[string]string{}
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			cf.Config.Labels[k] = v
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	id, _ := img.ConfigName() // the image ID, as `ctr images ls` and the kubelet show it
	fmt.Printf("%s %s %s\n", *out, tag.Name(), id)
	return nil
}

// buildLayer returns an uncompressed tar with parent directories, the files and dirs.
func buildLayer(files, dirs []string) ([]byte, error) {
	epoch := time.Unix(0, 0)
	type entry struct {
		src, dest string
	}
	var entries []entry
	allDirs := map[string]bool{"tmp": true}
	addParents := func(p string) {
		for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			allDirs[d] = true
		}
	}
	for _, f := range files {
		src, dest, ok := strings.Cut(f, "=")
		if !ok || src == "" || dest == "" {
			return nil, fmt.Errorf("--file %q: want SRC=DEST", f)
		}
		dest = strings.TrimPrefix(path.Clean("/"+dest), "/")
		addParents(dest)
		entries = append(entries, entry{src, dest})
	}
	for _, d := range dirs {
		d = strings.TrimPrefix(path.Clean("/"+d), "/")
		if d == "" {
			continue
		}
		allDirs[d] = true
		addParents(d)
	}
	dirList := make([]string, 0, len(allDirs))
	for d := range allDirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents sort before children

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.dest, Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
