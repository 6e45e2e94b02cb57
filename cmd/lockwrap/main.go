// Command lockwrap runs one occurrence of a scheduled command under a Redis lock; see
// docs/lockwrap.md.
//
//	lockwrap cp DEST
//	lockwrap [flags] -- COMMAND [ARGS...]
package main

import (
	"os"

	"github.com/lockedcron/lockedcron/internal/wrapper"
)

func main() {
	os.Exit(wrapper.Main(os.Args[1:], os.Getenv, os.Stderr))
}
