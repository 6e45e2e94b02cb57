package wrapper_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockedcron/lockedcron/internal/wrapper"
	"github.com/lockedcron/lockedcron/internal/wrapper/config"
)

// A password with an unencoded '#', '/' or '?' in $LOCKEDCRON_REDIS_URL makes the URL
// unreadable: lockwrap exits 70 saying how to encode it, and neither its stderr nor its
// report (which the pod's status and the controller's Events show) holds any piece of
// the password.
func TestMainKeepsAnUnencodedPasswordOutOfItsReport(t *testing.T) {
	for _, url := range []string{
		"redis://app:Hunter#Tango@127.0.0.1:6379",
		"redis://:Hunter/Tango@127.0.0.1:6379/0",
		"redis://app:Hunter?Tango@127.0.0.1:6379",
	} {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		termLog := filepath.Join(dir, "termination-log")
		env := map[string]string{config.EnvRedisURL: url, config.EnvKey: "k", config.EnvTerminationLog: termLog}
		var stderr bytes.Buffer
		if code := wrapper.Main([]string{"--", "touch", marker}, func(k string) string { return env[k] }, &stderr); code != wrapper.ExitInternal {
			t.Fatalf("%s: exit %d, want %d; stderr %s", url, code, wrapper.ExitInternal, stderr.String())
		}
		rep := readReport(t, termLog)
		for name, text := range map[string]string{"stderr": stderr.String(), "report": rep.Message} {
			if !strings.Contains(text, "--redis-url") || !strings.Contains(text, "percent-encode") {
				t.Errorf("%s: %s %q does not say how to fix it", url, name, text)
			}
			if strings.Contains(text, "Hunter") || strings.Contains(text, "Tango") {
				t.Errorf("%s: %s %q holds a piece of the password", url, name, text)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the command ran", url)
		}
	}
}
