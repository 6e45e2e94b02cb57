package checker

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// lockInput is one step of a run's critical section: its acquire or its release.
type lockInput struct {
	Key     string
	Exec    int // index into the executions
	Acquire bool
}

// free is the lock model's state when nobody holds the key.
const free = -1

// lockModel is a mutual-exclusion lock, one per key (porcupine partitions by key): an
// acquire needs the lock free and takes it; a release needs it held by the same run.
func lockModel(execs []Execution, lost map[runID]bool) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				k := op.Input.(lockInput).Key
				if _, ok := byKey[k]; !ok {
					order = append(order, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, k := range order {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() interface{} { return free },
		Step: func(state, input, _ interface{}) (bool, interface{}) {
			holder, in := state.(int), input.(lockInput)
			if in.Acquire {
				return holder == free, in.Exec
			}
			return holder == in.Exec, free
		},
		DescribeOperation: func(input, _ interface{}) string {
			in := input.(lockInput)
			e := execs[in.Exec]
			verb := "release"
			switch {
			case in.Acquire:
				verb = "acquire"
			case lost[e.id()]:
				verb = "lose (LockLost)"
			case e.End.IsZero():
				verb = "release (no end record)"
			}
			return fmt.Sprintf("%s %s by %s, token %d, exit %d", verb, e.Occurrence.UTC().Format("15:04:05"), e.Holder, e.Token, e.Exit)
		},
		DescribeState: func(state interface{}) string {
			if h := state.(int); h != free {
				return fmt.Sprintf("held by %s (token %d)", execs[h].Holder, execs[h].Token)
			}
			return "free"
		},
	}
}

// lockOperations turns each run into its acquire, at its start, and its release, at its
// end. A run without an end record, or one its holder reported LockLost, let go of the lock
// at an unknown instant after its start: its release may take effect anywhere from its
// start to its end (to the end of the history when there is none).
func lockOperations(execs []Execution, lost map[runID]bool) []porcupine.Operation {
	horizon := int64(math.MinInt64)
	for _, e := range execs {
		horizon = max(horizon, e.Start.UnixNano(), e.End.UnixNano())
	}
	horizon++
	ops := make([]porcupine.Operation, 0, 2*len(execs))
	for i, e := range execs {
		start := e.Start.UnixNano()
		ops = append(ops, porcupine.Operation{ClientId: i, Input: lockInput{Key: e.Key, Exec: i, Acquire: true}, Call: start, Return: start})
		rel := porcupine.Operation{ClientId: i, Input: lockInput{Key: e.Key, Exec: i}, Call: e.End.UnixNano(), Return: e.End.UnixNano()}
		if e.End.IsZero() {
			rel.Call, rel.Return = start, horizon
		} else if lost[e.id()] {
			rel.Call = start
		}
		ops = append(ops, rel)
	}
	return ops
}
