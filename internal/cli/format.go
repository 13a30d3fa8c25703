package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// CountsText writes counts by name for people: "duplicate 2, processed 1",
// names sorted, never Go's map syntax.
func CountsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// durationText writes d as a flag takes it, without the zero units that
// time.Duration.String adds: "6h", "1m", "1h30m", "200ms", not "6h0m0s".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
