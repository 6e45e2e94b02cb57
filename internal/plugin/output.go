package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/lockedcron/lockedcron/internal/printable"
)

// table is rows of columns; wide columns are shown only with -o wide.
type table struct {
	head []column
	rows [][]string
}

type column struct {
	name string
	wide bool
}

func cols(names ...string) []column {
	out := make([]column, len(names))
	for i, n := range names {
		out[i] = column{name: n}
	}
	return out
}

func wideCols(names ...string) []column {
	out := cols(names...)
	for i := range out {
		out[i].wide = true
	}
	return out
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write prints the table the way kubectl does (tab-aligned, upper-case headers).
func (t *table) write(w io.Writer, wide bool) error {
	tw := printers.GetNewTabWriter(w)
	line := func(cells []string) {
		var out []string
		for i, c := range t.head {
			if c.wide && !wide {
				continue
			}
			v := ""
			if i < len(cells) {
				v = cells[i]
			}
			if v == "" {
				v = "<none>"
			}
			// Every control escaped, tab and newline included: a form feed or vertical
			// tab would end the tabwriter's row or cell, a 0xff is its escape character.
			v = printable.OneLine(v)
			out = append(out, v)
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	var names []string
	for _, c := range t.head {
		names = append(names, c.name)
	}
	line(names)
	for _, r := range t.rows {
		line(r)
	}
	return tw.Flush()
}

// printData prints v as JSON or YAML (-o json|yaml).
func printData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = escapeJSONControls(b)
	switch format {
	case "json":
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("output %q", format)
}

// ts prints an instant in UTC, RFC 3339 (what --occurrence takes).
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// dur prints a duration rounded for people ("23.4s", "3m0s").
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// rel says how far t is from now: "in 42s", "3m0s ago".
func rel(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := t.Sub(now); d >= 0 {
		return "in " + dur(d)
	}
	return dur(now.Sub(t)) + " ago"
}
