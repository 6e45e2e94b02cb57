package audit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Keys of the job image's incremental mode (the job's own store, not lockedcron's).
const (
	// Records is the list of record ids to process, in order (the test pushes "1".."N").
	Records = "lockedcron-e2e:records"
	// Processed is the set of ids whose effect is done: the per-record unique key.
	Processed = "lockedcron-e2e:processed"
	// ProcessedLog gets "<id> <fencing token> <occurrence>" once per id, when its effect is done.
	ProcessedLog = "lockedcron-e2e:processed-log"
	// StoreFence is the highest fencing token that wrote to the store; lower ones are refused.
	StoreFence = "lockedcron-e2e:store-fence"
)

// ExactlyOnce checks the entries of ProcessedLog against the ids 1..n: it returns the ids
// logged more than once and those never logged (both empty: each processed exactly once),
// and any entry that does not parse as an error.
func ExactlyOnce(log []string, n int) (twice, missing []int, err error) {
	seen := map[int]int{}
	for i, e := range log {
		f := strings.Fields(e)
		if len(f) == 0 {
			return nil, nil, fmt.Errorf("processed-log entry %d is empty", i)
		}
		id, perr := strconv.Atoi(f[0])
		if perr != nil {
			return nil, nil, fmt.Errorf("processed-log entry %d %q: %w", i, e, perr)
		}
		seen[id]++
	}
	for id, c := range seen {
		if c > 1 || id < 1 || id > n {
			twice = append(twice, id)
		}
	}
	for id := 1; id <= n; id++ {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	sort.Ints(twice)
	return twice, missing, nil
}
