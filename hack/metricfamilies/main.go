// Command metricfamilies prints internal/metrics.Families as JSON (name → counter, gauge
// or histogram): the metrics the manager serves, for checks outside this module (the
// Grafana dashboard's test in hack/dashboard, which must not pull the operator's
// dependencies into its own module).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/lockedcron/lockedcron/internal/metrics"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(metrics.Families); err != nil {
		fmt.Fprintln(os.Stderr, "metricfamilies:", err)
		os.Exit(1)
	}
}
