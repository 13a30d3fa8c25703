package console

import (
	"fmt"
	"html/template"
	"time"
)

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsp": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"age":   age,
	"short": short,
	"str": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"intp": func(n *int) int {
		if n == nil {
			return 0
		}
		return *n
	},
	"intentURL": intentURL,
	// settleArgs is the settle form's data; a lookup that found the
	// action offers its reference.
	"settleArgs": func(op *session, tenant, key string, l *lookupView) map[string]any {
		ref := ""
		if l != nil && l.Outcome == "found" {
			ref = l.Reference
		}
		return map[string]any{"Op": op, "Tenant": tenant, "Key": key, "Reference": ref}
	},
}

// age is a duration as an operator reads it at a glance: "45s", "12m",
// "3h 05m", "2d 4h".
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
