package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The targets are judged over three full runs from fresh clones,
// each with its spread: --combine reads the JSON reports those runs wrote
// and puts their targets and paired ratios side by side, each run's own
// verdict and IQR unchanged (nothing is pooled across runs: runs minutes
// apart see different machines, which is why each ratio is paired within
// its run in the first place).

// workDirEnv names the directory scripts/bench was started from (it runs
// the harness from bench/): relative report paths are read from there, as
// the caller's shell completed them.
const workDirEnv = "BENCH_WORKDIR"

// loadReports reads the JSON reports at paths, in order.
func loadReports(paths []string) ([]*report, error) {
	if len(paths) == 0 {
		return nil, errors.New("--combine needs the JSON reports of the runs to combine (results/bench-*.json)")
	}
	base := os.Getenv(workDirEnv)
	var reps []*report
	for _, p := range paths {
		if base != "" && !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rep := &report{}
		if err := json.Unmarshal(b, rep); err != nil {
			return nil, fmt.Errorf("%s: not a bench report: %w", p, err)
		}
		if rep.Date.IsZero() || (len(rep.Targets) == 0 && len(rep.Pairs) == 0) {
			return nil, fmt.Errorf("%s: not a bench report (no date, targets or paired ratios)", p)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// combined writes the runs' targets and paired ratios side by side.
func combined(w io.Writer, reps []*report) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## %d bench runs side by side\n\n", len(reps))
	sb.WriteString("| run | started (UTC) | commit | machine | command | took |\n|---|---|---|---|---|---|\n")
	for i, r := range reps {
		commit := r.Commit
		if commit == "" {
			commit = "–"
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s, %d cores | `%s` | %s |\n", i+1, r.Date.UTC().Format("2006-01-02 15:04"),
			cell(commit), cell(r.Machine.CPU), r.Machine.Cores, cell(r.Command), (time.Duration(r.Seconds) * time.Second).String())
	}

	var names []string
	for _, r := range reps {
		for _, t := range r.Targets {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	if len(names) > 0 {
		sb.WriteString("\nTargets, each run's own verdict (met: the whole IQR on the target's side; no verdict: it straddles the target):\n\n")
		sb.WriteString("| target |")
		for i := range reps {
			fmt.Fprintf(&sb, " run %d |", i+1)
		}
		sb.WriteString(" met / no verdict / not met |\n|---|")
		sb.WriteString(strings.Repeat("---|", len(reps)+1) + "\n")
		for _, name := range names {
			fmt.Fprintf(&sb, "| %s |", cell(name))
			var met, open, missed int
			for _, r := range reps {
				i := slices.IndexFunc(r.Targets, func(t target) bool { return t.Name == name })
				if i < 0 {
					sb.WriteString(" – |")
					continue
				}
				t := r.Targets[i]
				verdict := "not met"
				switch {
				case t.Undecided:
					verdict, open = "no verdict", open+1
				case t.Met:
					verdict, met = "**met**", met+1
				default:
					missed++
				}
				if t.OutOfReach {
					verdict += ", out of reach"
				}
				fmt.Fprintf(&sb, " %s: %s |", cell(t.Actual), verdict)
			}
			fmt.Fprintf(&sb, " %d / %d / %d |\n", met, open, missed)
		}
	}

	type key struct {
		name    string
		callers int
	}
	var pairs []string
	var callers []int
	byRun := make([]map[key]pairStat, len(reps))
	for i, r := range reps {
		byRun[i] = map[key]pairStat{}
		for _, p := range r.Pairs {
			byRun[i][key{p.Name, p.Callers}] = p
			if !slices.Contains(pairs, p.Name) {
				pairs = append(pairs, p.Name)
			}
			if !slices.Contains(callers, p.Callers) {
				callers = append(callers, p.Callers)
			}
		}
	}
	slices.Sort(callers)
	if len(pairs) > 0 {
		sb.WriteString("\nPaired ratios, one line per run in run order: the median of the rounds' paired ratios and its IQR (`*`: an IQR wider than 20 % of its median; –: not measured in that run):\n\n")
		sb.WriteString("| comparison |")
		for _, c := range callers {
			if c == 1 {
				sb.WriteString(" 1 caller |")
			} else {
				fmt.Fprintf(&sb, " %d callers |", c)
			}
		}
		sb.WriteString("\n|---|" + strings.Repeat("---:|", len(callers)) + "\n")
		for _, name := range pairs {
			fmt.Fprintf(&sb, "| %s |", cell(name))
			for _, c := range callers {
				var lines []string
				found := false
				for i := range reps {
					p, ok := byRun[i][key{name, c}]
					if !ok {
						lines = append(lines, "–")
						continue
					}
					found = true
					s := fmt.Sprintf("%.2f (%.2f–%.2f)", p.Median, p.Q1, p.Q3)
					if !p.Stable {
						s += `\*`
					}
					lines = append(lines, s)
				}
				if !found {
					sb.WriteString(" – |")
					continue
				}
				sb.WriteString(" " + strings.Join(lines, "<br>") + " |")
			}
			sb.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// cell makes text safe inside a Markdown table cell: a pipe escaped (as
// GitHub's tables take it, in code spans too), a line break a space.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// gitCommit names the checkout the benchmark runs from ("9deda67", with
// "-dirty" when it has uncommitted changes), or "" outside a git checkout.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
