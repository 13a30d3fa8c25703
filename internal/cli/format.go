package cli

import (
	"fmt"
	"sort"
	"strings"
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
