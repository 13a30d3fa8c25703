package importrule

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestSizes fails on a non-test file over MaxFileLines lines, or a function
// of an engine package over MaxFuncLines lines.
func TestSizes(t *testing.T) {
	t.Parallel()
	engine := map[string]bool{}
	for _, cmd := range Production {
		for _, p := range goList(t, "-deps", "./"+cmd) {
			if rel, ok := Rel(p.ImportPath); ok {
				engine[rel] = true
			}
		}
	}
	root := moduleRoot(t)
	used := map[[2]string]bool{}
	var problems []string
	complain := func(key [2]string, msg string) {
		if SizePending[key] != "" {
			used[key] = true
			return
		}
		problems = append(problems, msg)
	}
	for _, p := range goListFiles(t) {
		rel, ok := Rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file, _ := filepath.Rel(root, path)
			if n := bytes.Count(src, []byte("\n")); n > MaxFileLines {
				complain([2]string{"file", file}, file+": "+strconv.Itoa(n)+" lines (at most "+strconv.Itoa(MaxFileLines)+")")
			}
			if !engine[rel] {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n <= MaxFuncLines {
					continue
				}
				fn := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) > 0 {
					fn = recvName(fd.Recv.List[0].Type) + "." + fn
				}
				complain([2]string{"func", file + ":" + fn}, file+": func "+fn+" has "+strconv.Itoa(n)+" lines (at most "+strconv.Itoa(MaxFuncLines)+" in an engine package)")
			}
		}
	}
	for key, why := range SizePending {
		if !used[key] {
			problems = append(problems, "SizePending "+key[0]+" "+key[1]+" ("+why+") is no longer needed: remove it from size.go")
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
