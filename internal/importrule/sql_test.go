package importrule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// tableRef finds the table a SQL text names after FROM, JOIN, INTO, UPDATE,
// or TABLE (ALTER, TRUNCATE, LOCK ...); keywordRef requires the text to read
// as SQL at all, so that prose ("update the actions") is not taken for a
// statement.
var (
	tableRef = regexp.MustCompile(`(?i)\b(?:from|join|into|update|table|truncate)\s+(?:only\s+)?(?:if\s+(?:not\s+)?exists\s+)?([a-z_][a-z0-9_]*)`)
	sqlWords = regexp.MustCompile(`(?i)\b(select|insert\s+into|update\s+\w+\s+set|delete\s+from|returning|where|on\s+conflict|truncate|lock\s+table|create\s+(?:unique\s+)?(?:table|index))\b`)
)

// sqlTables returns the tables of the schema a string literal names, when it
// reads as SQL.
func sqlTables(s string) []string {
	if !sqlWords.MatchString(s) {
		return nil
	}
	var out []string
	for _, m := range tableRef.FindAllStringSubmatch(s, -1) {
		t := strings.ToLower(m[1])
		if _, ok := Owners[t]; ok || strings.HasPrefix(t, "river_") {
			out = append(out, t)
		}
	}
	return out
}

func TestSQLTables(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]string{
		"SELECT status FROM actions WHERE tenant_id = $1":                     "actions",
		"update actions set status = 'x' where key = $1":                      "actions",
		"INSERT INTO intents (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING":  "intents",
		"WITH a AS (SELECT 1 FROM intents i JOIN actions x ON true) SELECT 1": "intents actions",
		"DELETE FROM river_job WHERE id = $1":                                 "river_job",
		"executor: update actions: %w":                                        "",
		"the actions table":                                                   "",
	} {
		if got := strings.Join(sqlTables(s), " "); got != want {
			t.Errorf("sqlTables(%q) = %q, want %q", s, got, want)
		}
	}
}

// stringValue is the text of a string literal or of a + concatenation of
// them (a constant built from pieces).
func stringValue(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, ok1 := stringValue(e.X)
		r, ok2 := stringValue(e.Y)
		return l + r, ok1 || ok2
	case *ast.ParenExpr:
		return stringValue(e.X)
	}
	return "", false
}

// ledgerFaces are the packages through which the ledger (internal/ledger)
// is reached; their tests check the ledger's state directly, as the
// ledger's own tests would.
var ledgerFaces = map[string]bool{
	"internal/ledger":       true,
	"intent":                true,
	"executor":              true,
	"executor/executortest": true,
}

// TestSQLOwnership fails when a package's code, test files included, holds
// SQL naming a table another package owns (Owners), or when its non-test
// code exports a SQL string: SQL is each owner's private business, reached
// through its Go API (or, in tests, its test API). The ledger's faces
// (ledgerFaces) may read and write the ledger's tables in their tests.
func TestSQLOwnership(t *testing.T) {
	t.Parallel()
	pkgs := goListFiles(t)
	used := map[[2]string]bool{}
	var problems []string
	complain := func(key [2]string, msg string) {
		if SQLPending[key] != "" || SQLAllowed[key] != "" {
			used[key] = true
			return
		}
		problems = append(problems, msg)
	}
	for _, p := range pkgs {
		rel, ok := Rel(p.ImportPath)
		if !ok || rel == "migrations" {
			continue
		}
		files := p.GoFiles
		if rel != "internal/importrule" {
			// The rule's own tests hold sample SQL on purpose.
			files = append(append(files[:len(files):len(files)], p.TestGoFiles...), p.XTestGoFiles...)
		}
		tests := map[string]bool{}
		for _, name := range append(p.TestGoFiles, p.XTestGoFiles...) {
			tests[name] = true
		}
		for _, name := range files {
			path := filepath.Join(p.Dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					for _, tb := range sqlTables(s) {
						owner := Owners[tb]
						if strings.HasPrefix(tb, "river_") {
							if tests[name] {
								// River's tables have no owner here; tests
								// check River's jobs as River stores them.
								continue
							}
							owner = "(River's API)"
						}
						if owner != rel && !(tests[name] && ledgerFaces[rel] && owner == Owners["actions"]) {
							pos := fset.Position(lit.Pos())
							complain([2]string{rel, tb}, rel+": "+filepath.Base(pos.Filename)+":"+strconv.Itoa(pos.Line)+" names table "+tb+", owned by "+owner)
						}
					}
				}
				return true
			})
			if tests[name] {
				// A test file exports nothing another package could use.
				continue
			}
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if !id.IsExported() || i >= len(vs.Values) {
							continue
						}
						if s, ok := stringValue(vs.Values[i]); ok && sqlWords.MatchString(s) && len(sqlTables(s)) > 0 {
							complain([2]string{rel, "exported " + id.Name}, rel+": exports SQL as "+id.Name)
						}
					}
				}
			}
		}
	}
	for key, why := range SQLAllowed {
		if !used[key] {
			problems = append(problems, "SQLAllowed "+key[0]+" → "+key[1]+" ("+why+") is no longer needed: remove it from tables.go")
		}
	}
	for key, why := range SQLPending {
		if !used[key] {
			problems = append(problems, "SQLPending "+key[0]+" → "+key[1]+" ("+why+") is no longer needed: remove it from tables.go")
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// goListFiles lists the module's packages with their directories and
// non-test Go files.
func goListFiles(t *testing.T) []listed {
	t.Helper()
	pkgs := goList(t, "./...")
	for _, p := range pkgs {
		if p.Dir == "" {
			t.Fatalf("go list gave no directory for %s", p.ImportPath)
		}
		if _, err := os.Stat(p.Dir); err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}
