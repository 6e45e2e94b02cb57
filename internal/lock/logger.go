package lock

import (
	"context"
	"fmt"

	"github.com/lockedcron/lockedcron/internal/printable"
	"github.com/lockedcron/lockedcron/internal/report"
)

// maxLogLine bounds one go-redis log line: it may quote a server (a Sentinel's master
// address, an error's text), and a reply may be megabytes long.
const maxLogLine = 512

// Logger is go-redis's logger (redis.SetLogger) for a process whose Redis servers are
// input: each line is one line, the controls a terminal or a log pipeline acts on escaped
// (a server's text holding "\n{…}" forged a JSON record of the manager's own), cut to
// maxLogLine bytes, and handed to Print.
type Logger struct{ Print func(line string) }

// Printf formats a go-redis log line.
func (l Logger) Printf(_ context.Context, format string, v ...any) {
	l.Print(report.TruncateRunes(printable.OneLine(fmt.Sprintf(format, v...)), maxLogLine))
}
