// Package problemdocs checks, in tests, that problem type URLs name a
// section of the repository's docs/problems.md. It imports the standard
// library and internal/problem (for the page's URL).
package problemdocs

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// Page is where the problem types are documented.
const Page = problem.Docs

// Check fails t unless every type is Page#<anchor> and docs/problems.md
// (found by walking up from the test's directory) has a "## <anchor>"
// section.
func Check(t testing.TB, types ...string) {
	t.Helper()
	anchors := Anchors(t)
	for _, typ := range types {
		anchor, ok := strings.CutPrefix(typ, Page+"#")
		if !ok {
			t.Errorf("problem type %q is not a section of %s", typ, Page)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("problem type %q: docs/problems.md has no section %q", typ, "## "+anchor)
		}
	}
}

// Anchors returns the "## " section names of docs/problems.md.
func Anchors(t testing.TB) map[string]bool {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "docs", "problems.md"))
		if err == nil {
			defer f.Close()
			out := map[string]bool{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if name, ok := strings.CutPrefix(sc.Text(), "## "); ok {
					out[strings.TrimSpace(name)] = true
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("docs/problems.md not found above the test's directory")
		}
		dir = parent
	}
}
