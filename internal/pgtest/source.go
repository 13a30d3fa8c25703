package pgtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
)

// sqlStart is how a statement begins, after blanks and parentheses.
var sqlStart = regexp.MustCompile(`^[\s(]*(?i:SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// SourceStatements returns every SQL statement that the Go files matching
// patterns (relative to the test's package directory: "*.go") declare as
// a string constant, named as declared and sorted by name, so that a plan
// check covers each statement of the package without a list to keep. A
// constant's value may join string literals and other constants of the
// same files with +; a constant is a statement when its value starts with
// SELECT, INSERT, UPDATE, DELETE or WITH (a fragment such as a column list
// is not). Test files are left out.
func SourceStatements(tb testing.TB, patterns ...string) []Statement {
	tb.Helper()
	fset := token.NewFileSet()
	exprs := map[string]ast.Expr{}
	for _, pat := range patterns {
		files, err := filepath.Glob(pat)
		if err != nil {
			tb.Fatal(err)
		}
		for _, name := range files {
			if matched, _ := filepath.Match("*_test.go", filepath.Base(name)); matched {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				tb.Fatal(err)
			}
			collectConsts(f, exprs)
		}
	}
	var out []Statement
	for name := range exprs {
		v, ok := constString(exprs, name, 0)
		if ok && sqlStart.MatchString(v) {
			out = append(out, Statement{Name: name, SQL: v})
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no SQL constant in %v", patterns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func collectConsts(f *ast.File, into map[string]ast.Expr) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					into[n.Name] = vs.Values[i]
				}
			}
		}
	}
}

// constString evaluates the string constant name; false when it is not
// one (a number, an iota, a call).
func constString(exprs map[string]ast.Expr, name string, depth int) (string, bool) {
	e, ok := exprs[name]
	if !ok || depth > 16 {
		return "", false
	}
	return evalString(exprs, e, depth+1)
}

func evalString(exprs map[string]ast.Expr, e ast.Expr, depth int) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		return constString(exprs, x.Name, depth)
	case *ast.ParenExpr:
		return evalString(exprs, x.X, depth)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		l, ok1 := evalString(exprs, x.X, depth)
		r, ok2 := evalString(exprs, x.Y, depth)
		return l + r, ok1 && ok2
	}
	return "", false
}
