// Command startclock prints the node's clock as its first instruction and exits: the job
// of hack/bench-start.sh, which compares that instant with the occurrence's scheduled time.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	now := time.Now()
	fmt.Printf("startclock %s\n", now.UTC().Format(time.RFC3339Nano))
	os.Exit(0)
}
