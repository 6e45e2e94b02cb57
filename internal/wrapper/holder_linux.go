package wrapper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// claimHolder makes this lockwrap the only one of its holder, for its key and occurrence
// (run), in its network namespace, which a pod's containers share (and a host's processes
// theirs): it listens on an abstract Unix socket named for them, which the kernel lets go
// when the process ends, however it ends (a restarted container's lockwrap finds it
// free). A second
// lockwrap of the holder while the first runs — one its job runs (it inherits the run's
// LOCKEDCRON_HOLDER, LOCKEDCRON_OCCURRENCE and key), one exec'd into the container (the
// container's environment) — would find the lock held under its own holder with a
// running entry of the lock's token, and take the live run's lock over as a crashed
// predecessor's. It gets ErrHolderRuns. Another failure to listen (a seccomp profile that
// refuses Unix sockets) is returned as it is, for the caller to warn of: the run goes on
// unguarded, as before. release closes the socket.
func claimHolder(holder, run string) (release func(), err error) {
	sum := sha256.Sum256([]byte(holder + "\x00" + run))
	l, err := net.Listen("unix", "@lockedcron/holder/"+hex.EncodeToString(sum[:16]))
	if errors.Is(err, syscall.EADDRINUSE) {
		return func() {}, ErrHolderRuns
	}
	if err != nil {
		return func() {}, fmt.Errorf("listening on an abstract Unix socket for the holder: %w", err)
	}
	return func() { _ = l.Close() }, nil
}
