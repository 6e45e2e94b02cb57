//go:build soak

package soak

// TEMPORARY, not committed: keeps the debug session's cluster lock while follow-up runs go
// under it (LOCKEDCRON_CLUSTER_LOCKED=1).
import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if strings.HasSuffix(os.Getenv("SOAK_OUT"), "/debug1") {
		for {
			if _, err := os.Stat("/tmp/soak-hold"); err != nil {
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
	os.Exit(code)
}
