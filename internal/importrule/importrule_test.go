package importrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

type listed struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// goList runs `go list -json` with args from the module's root.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", len(pkgs))
	}
	return pkgs
}

func TestImportRule(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./...")
	usedPending := map[[2]string]bool{}
	var problems []string
	for _, p := range pkgs {
		rel, ok := Rel(p.ImportPath)
		if !ok {
			continue
		}
		layer, ok := LayerOf(rel)
		if !ok {
			problems = append(problems, rel+": not placed in a layer (add it to layers in internal/importrule/rule.go)")
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				irel, ok := Rel(imp)
				if !ok || irel == rel {
					continue
				}
				il, ok := LayerOf(irel)
				if !ok {
					continue // reported as its own package
				}
				pair := [2]string{rel, irel}
				if only, ok := ImportedOnlyBy[irel]; ok && !slices.Contains(only, rel) {
					problems = append(problems, rel+" imports "+irel+", which only "+strings.Join(only, ", ")+" may import (ImportedOnlyBy)")
				}
				switch {
				case il < layer:
				case test && (il == LabLayer || il == layer):
					// Tests may use the lab's stand-ins and databases, and
					// their neighbours (an x_test drives its own package).
				case il == layer && Allowed[pair] != "":
				case test && AllowedInTests[pair] != "":
				case Pending[pair] != "":
					usedPending[pair] = true
				default:
					kind := "imports"
					if test {
						kind = "test imports"
					}
					problems = append(problems, rel+" (layer "+itoa(layer)+") "+kind+" "+irel+" (layer "+itoa(il)+")")
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}

	for _, cmd := range Production {
		deps := goList(t, "-deps", "./"+cmd)
		var lab []string
		for _, d := range deps {
			if rel, ok := Rel(d.ImportPath); ok {
				if l, ok := LayerOf(rel); ok && l == LabLayer {
					lab = append(lab, rel)
				}
			}
		}
		pair := [2]string{cmd, "lab"}
		switch {
		case len(lab) == 0:
		case Pending[pair] != "":
			usedPending[pair] = true
			t.Logf("%s links lab packages (pending: %s): %s", cmd, Pending[pair], strings.Join(lab, ", "))
		default:
			problems = append(problems, cmd+" links lab packages: "+strings.Join(lab, ", "))
		}
	}

	for pair, why := range Pending {
		if !usedPending[pair] {
			problems = append(problems, "Pending "+pair[0]+" → "+pair[1]+" ("+why+") is no longer needed: remove it from rule.go")
		}
	}
	for pair, why := range AllowedInTests {
		if why == "" {
			problems = append(problems, "AllowedInTests "+pair[0]+" → "+pair[1]+" gives no reason")
		}
	}
	for imported, only := range ImportedOnlyBy {
		if _, ok := LayerOf(imported); !ok || len(only) == 0 {
			problems = append(problems, "ImportedOnlyBy "+imported+": not placed in a layer, or no importer named")
		}
	}
	for pair, why := range Allowed {
		if why == "" {
			problems = append(problems, "Allowed "+pair[0]+" → "+pair[1]+" gives no reason")
		}
	}
	sort.Strings(problems)
	problems = slices.Compact(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestLayerOf checks the table's lookup, which the rule test relies on.
func TestLayerOf(t *testing.T) {
	t.Parallel()
	for rel, want := range map[string]int{
		"derive": 0, "tools": 1, "tools/apipix": 1, "internal/ledger": 2, "intent": 2, "executor": 3, "executor/executortest": LabLayer,
		"executor/internal/sandboxcheck": 3, "server/sidecar": 4, "sandbox/psp": LabLayer,
		"tools/toolstest": LabLayer, "internal/cli": 6, "internal/lab/labcli": 7, "cmd/retrysafe": 8,
	} {
		if got, ok := LayerOf(rel); !ok || got != want {
			t.Errorf("LayerOf(%q) = %d, %v; want %d", rel, got, ok, want)
		}
	}
	if _, ok := LayerOf("nowhere"); ok {
		t.Error(`LayerOf("nowhere") placed an unknown package`)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }
