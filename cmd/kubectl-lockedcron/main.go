// Command kubectl-lockedcron is the kubectl plugin for LockedCronJobs: put it on PATH and
// run `kubectl lockedcron --help` (docs/kubectl-plugin.md).
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/lockedcron/lockedcron/internal/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
