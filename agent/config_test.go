package agent_test

import (
	"errors"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
)

func TestConfigValidate(t *testing.T) {
	h := newHarness(t, agent.JournalOn)
	base := h.agent.Config()
	got := base
	if got.Journal != agent.JournalOn || got.ReplyAction != agent.ReplyToolName || got.MaxSteps != 4 ||
		got.ClaimTTL != 3*time.Minute || len(got.ModelTools) != 1 || got.ModelTools[0] != "pix.charge" ||
		got.ServiceWindow != 24*time.Hour || got.Refusal != agent.RefusalFixed || got.Groups != agent.GroupsConversation ||
		got.Delivery.PairRateBackoff != 30*time.Second || !got.Delivery.RetryCodes[agent.CodePairRateLimit] || got.Delivery.RetryCodes[agent.CodeReengagement] {
		t.Fatalf("defaults: %+v", got)
	}
	for name, mut := range map[string]func(*agent.Config){
		"no db":          func(c *agent.Config) { c.DB = nil },
		"no model":       func(c *agent.Config) { c.Model = nil },
		"no model name":  func(c *agent.Config) { c.ModelName = "" },
		"journal":        func(c *agent.Config) { c.Journal = "sometimes" },
		"reply tool":     func(c *agent.Config) { c.ReplyAction = "sms.send" },
		"offer reply":    func(c *agent.Config) { c.ModelTools = []string{agent.ReplyToolName} },
		"unknown tool":   func(c *agent.Config) { c.ModelTools = []string{"pix.refund"} },
		"steps":          func(c *agent.Config) { c.MaxSteps = -1 },
		"claim vs model": func(c *agent.Config) { c.ClaimTTL, c.ModelTimeout = time.Minute, time.Minute },
		"template name":  func(c *agent.Config) { c.Templates = map[string]agent.ReplyTemplate{"*": {Name: "Bad Name"}} },
		"refusal":        func(c *agent.Config) { c.Refusal = "ignore" },
		"groups":         func(c *agent.Config) { c.Groups = "everyone" },
		"window":         func(c *agent.Config) { c.ServiceWindow = -time.Hour },
	} {
		c := base
		mut(&c)
		if _, err := agent.New(c); !errors.Is(err, agent.ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
	if _, err := (agent.RiverConfig{JobTimeout: time.Minute, RescueStuckJobsAfter: time.Minute}).Validate(); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("rescue <= timeout accepted: %v", err)
	}
}
